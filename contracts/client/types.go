package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/axsched/ax/contracts"
)

// ListTypes loads every registered task type, ordered by name.
func (c *Client) ListTypes(ctx context.Context) ([]contracts.TaskType, error) {
	var out contracts.TaskTypeList
	if err := c.do(ctx, http.MethodGet, "/v1/types", nil, &out); err != nil {
		return nil, err
	}
	return out.Types, nil
}

// GetType loads one task type and the settings its tasks inherit.
func (c *Client) GetType(ctx context.Context, name string) (*contracts.TaskType, error) {
	var out contracts.TaskType
	return &out, c.do(ctx, http.MethodGet, "/v1/types/"+url.PathEscape(name), nil, &out)
}

// UpdateType changes the settings that u names and keeps the others; it
// answers with the type as stored. Types are registered by executors, so an
// unknown name is a not_found problem rather than a new type.
func (c *Client) UpdateType(ctx context.Context, name string, u contracts.TaskTypeUpdate) (*contracts.TaskType, error) {
	var out contracts.TaskType
	return &out, c.do(ctx, http.MethodPut, "/v1/types/"+url.PathEscape(name), u, &out)
}
