package client

import (
	"context"
	"net/http"

	"github.com/axsched/ax/contracts"
)

// WhoAmI names the client's API key as the server sees it, or reports
// that the server checks no keys (Caller.Auth false).
func (c *Client) WhoAmI(ctx context.Context) (*contracts.Caller, error) {
	var out contracts.Caller
	return &out, c.do(ctx, http.MethodGet, "/v1/whoami", nil, &out)
}
