package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/axsched/ax/contracts"
)

// CreateSchedule creates a schedule; a taken name is a conflict problem.
func (c *Client) CreateSchedule(ctx context.Context, req contracts.ScheduleRequest) (*contracts.Schedule, error) {
	var out contracts.Schedule
	return &out, c.do(ctx, http.MethodPost, "/v1/schedules", req, &out)
}

// ListSchedules loads a page of schedules named after after (empty: from
// the first); limit 0 is the server's default.
func (c *Client) ListSchedules(ctx context.Context, after string, limit int) (*contracts.ScheduleList, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	var out contracts.ScheduleList
	return &out, c.getPage(ctx, "/v1/schedules", q, limit, &out)
}

// GetSchedule loads one schedule.
func (c *Client) GetSchedule(ctx context.Context, name string) (*contracts.Schedule, error) {
	var out contracts.Schedule
	return &out, c.do(ctx, http.MethodGet, "/v1/schedules/"+url.PathEscape(name), nil, &out)
}

// UpdateSchedule replaces a schedule's definition.
func (c *Client) UpdateSchedule(ctx context.Context, name string, req contracts.ScheduleRequest) (*contracts.Schedule, error) {
	var out contracts.Schedule
	return &out, c.do(ctx, http.MethodPut, "/v1/schedules/"+url.PathEscape(name), req, &out)
}

// DeleteSchedule deletes a schedule.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/schedules/"+url.PathEscape(name), nil, nil)
}

// PauseSchedule pauses (paused true) or resumes a schedule.
func (c *Client) PauseSchedule(ctx context.Context, name string, paused bool) (*contracts.Schedule, error) {
	verb := "/resume"
	if paused {
		verb = "/pause"
	}
	var out contracts.Schedule
	return &out, c.do(ctx, http.MethodPost, "/v1/schedules/"+url.PathEscape(name)+verb, nil, &out)
}
