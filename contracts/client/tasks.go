package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/axsched/ax/contracts"
)

// TaskFilter narrows ListTasks and the bulk operations; empty fields do not
// filter. Times are RFC 3339.
type TaskFilter struct {
	Type          string
	Status        string
	BizKey        string
	Node          string
	CreatedAfter  string
	CreatedBefore string
}

// Values is the filter as query parameters.
func (f TaskFilter) Values() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"type": f.Type, "status": f.Status, "biz_key": f.BizKey, "node": f.Node,
		"created_after": f.CreatedAfter, "created_before": f.CreatedBefore} {
		if v != "" {
			q.Set(k, v)
		}
	}
	return q
}

// ListTasks returns one page of the tasks that match f, newest first;
// cursor is the previous page's NextCursor ("" for the first page) and
// limit 0 takes the server's default.
func (c *Client) ListTasks(ctx context.Context, f TaskFilter, limit int, cursor string) (*contracts.TaskList, error) {
	q := f.Values()
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var out contracts.TaskList
	return &out, c.getPage(ctx, "/v1/tasks", q, limit, &out)
}

// Stats returns the task counts per type and state and each lane's backlog.
func (c *Client) Stats(ctx context.Context) (*contracts.Stats, error) {
	var out contracts.Stats
	return &out, c.do(ctx, http.MethodGet, "/v1/stats", nil, &out)
}

// BulkCancel dry-runs or confirms the cancellation of every task a filter
// matches (see contracts.BulkRequest).
func (c *Client) BulkCancel(ctx context.Context, req contracts.BulkRequest) (*contracts.BulkResult, error) {
	var out contracts.BulkResult
	return &out, c.do(ctx, http.MethodPost, "/v1/tasks:cancel", req, &out)
}

// BulkRetryDeadLetters dry-runs or confirms the re-run of every open dead
// letter a filter matches.
func (c *Client) BulkRetryDeadLetters(ctx context.Context, req contracts.BulkRequest) (*contracts.BulkResult, error) {
	var out contracts.BulkResult
	return &out, c.do(ctx, http.MethodPost, "/v1/deadletters:retry", req, &out)
}

// ListScheduleTasks returns one page of the tasks schedule name fired,
// latest fire time first, each with its origin; an unknown schedule has
// none. It takes no other filter (see GET /v1/tasks?schedule=).
func (c *Client) ListScheduleTasks(ctx context.Context, name string, limit int, cursor string) (*contracts.TaskList, error) {
	q := url.Values{"schedule": {name}}
	if cursor != "" {
		q.Set("cursor", cursor)
	}
	var out contracts.TaskList
	return &out, c.getPage(ctx, "/v1/tasks", q, limit, &out)
}
