package client

import (
	"context"
	"net/http"

	"github.com/axsched/ax/contracts"
)

// ListNodes returns the executors of the membership registry.
func (c *Client) ListNodes(ctx context.Context) (*contracts.NodeList, error) {
	var out contracts.NodeList
	return &out, c.do(ctx, http.MethodGet, "/v1/nodes", nil, &out)
}
