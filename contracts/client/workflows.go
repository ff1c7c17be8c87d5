package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/axsched/ax/contracts"
)

// CreateWorkflow creates a workflow; the answer has every step's task ID.
func (c *Client) CreateWorkflow(ctx context.Context, req contracts.WorkflowRequest) (*contracts.Workflow, error) {
	var out contracts.Workflow
	return &out, c.do(ctx, http.MethodPost, "/v1/workflows", req, &out)
}

// GetWorkflow reads a workflow and its steps' states.
func (c *Client) GetWorkflow(ctx context.Context, id string) (*contracts.Workflow, error) {
	var out contracts.Workflow
	return &out, c.do(ctx, http.MethodGet, "/v1/workflows/"+url.PathEscape(id), nil, &out)
}

// CancelWorkflow cancels a workflow and its unfinished steps.
func (c *Client) CancelWorkflow(ctx context.Context, id string) (*contracts.Workflow, error) {
	var out contracts.Workflow
	return &out, c.do(ctx, http.MethodPost, "/v1/workflows/"+url.PathEscape(id)+"/cancel", nil, &out)
}

// TaskLineage returns the whole chain around a task.
func (c *Client) TaskLineage(ctx context.Context, id string) (*contracts.Lineage, error) {
	var out contracts.Lineage
	return &out, c.do(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(id)+"/lineage", nil, &out)
}

// BizKeyLineage returns the lineages of the workflows and tasks holding a
// business key, of one task type only when taskType is not empty.
func (c *Client) BizKeyLineage(ctx context.Context, bizKey, taskType string) (*contracts.LineageList, error) {
	q := url.Values{"biz_key": {bizKey}}
	if taskType != "" {
		q.Set("type", taskType)
	}
	var out contracts.LineageList
	return &out, c.do(ctx, http.MethodGet, "/v1/lineage?"+q.Encode(), nil, &out)
}

// WorkflowFilter selects workflows for ListWorkflows; empty fields do not
// filter.
type WorkflowFilter struct {
	Status        string
	Name          string
	BizKey        string
	CreatedAfter  string
	CreatedBefore string
}

// ListWorkflows returns one page of the workflows that match f, newest
// first; cursor is the previous page's NextCursor ("" for the first page)
// and limit 0 takes the server's default.
func (c *Client) ListWorkflows(ctx context.Context, f WorkflowFilter, limit int, cursor string) (*contracts.WorkflowList, error) {
	q := url.Values{}
	for k, v := range map[string]string{"status": f.Status, "name": f.Name, "biz_key": f.BizKey,
		"created_after": f.CreatedAfter, "created_before": f.CreatedBefore, "cursor": cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var out contracts.WorkflowList
	return &out, c.getPage(ctx, "/v1/workflows", q, limit, &out)
}
