package client

import (
	"context"
	"net/http"
	"net/url"

	"github.com/axsched/ax/contracts"
)

// StartRollout starts sending a share of a type's new tasks to executors
// of req.Version; a type whose rollout still runs answers a conflict.
func (c *Client) StartRollout(ctx context.Context, name string, req contracts.RolloutRequest) (*contracts.Rollout, error) {
	var out contracts.Rollout
	return &out, c.do(ctx, http.MethodPut, "/v1/types/"+url.PathEscape(name)+"/rollout", req, &out)
}

// GetRollout loads a type's rollout, both versions' figures over the
// guard's window, the verdict and the latest moves.
func (c *Client) GetRollout(ctx context.Context, name string) (*contracts.Rollout, error) {
	var out contracts.Rollout
	return &out, c.do(ctx, http.MethodGet, "/v1/types/"+url.PathEscape(name)+"/rollout", nil, &out)
}

// MoveRollout is an operator's move: "promote" (the next step now),
// "pause", "resume" or "rollback", logged with reason.
func (c *Client) MoveRollout(ctx context.Context, name, action, reason string) (*contracts.Rollout, error) {
	var out contracts.Rollout
	body := struct {
		Reason string `json:"reason,omitempty"`
	}{reason}
	return &out, c.do(ctx, http.MethodPost, "/v1/types/"+url.PathEscape(name)+"/rollout/"+url.PathEscape(action), body, &out)
}
