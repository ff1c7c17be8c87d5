package client

import (
	"context"
	"net/http"
	"net/url"

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
	var out contracts.DeadLetterList
	return &out, c.getPage(ctx, "/v1/deadletters", q, f.Limit, &out)
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
