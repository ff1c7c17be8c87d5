package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"github.com/axsched/ax/contracts"
)

// DeadLetterFilter narrows ListDeadLetters.
type DeadLetterFilter struct {
	// All includes letters already re-run.
	All  bool
	Type string
	// TaskID lists only the letters of this task.
	TaskID string
	Before string
	Limit  int
}

// ListDeadLetters returns dead letters, newest first.
func (c *Client) ListDeadLetters(ctx context.Context, f DeadLetterFilter) (*contracts.DeadLetterList, error) {
	q := url.Values{}
	if f.All {
		q.Set("all", "true")
	}
	if f.Type != "" {
		q.Set("type", f.Type)
	}
	if f.TaskID != "" {
		q.Set("task_id", f.TaskID)
	}
	if f.Before != "" {
		q.Set("before", f.Before)
	}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	path := "/v1/deadletters"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out contracts.DeadLetterList
	return &out, c.do(ctx, http.MethodGet, path, nil, &out)
}

// RetryDeadLetter re-runs a dead letter's task; the history records who.
func (c *Client) RetryDeadLetter(ctx context.Context, id, actor string) (*contracts.DeadLetter, error) {
	var out contracts.DeadLetter
	path := "/v1/deadletters/" + url.PathEscape(id) + "/retry"
	if actor != "" {
		path += "?actor=" + url.QueryEscape(actor)
	}
	return &out, c.do(ctx, http.MethodPost, path, nil, &out)
}
