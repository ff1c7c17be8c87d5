package client

import (
	"context"
	"net/http"

	"github.com/axsched/ax/contracts"
)

// SubmitBatch submits up to 1,000 tasks in one request, the fast path for
// bulk producers. A rejected submission does not fail the call: its result
// carries the problem while the valid ones are created, so check each
// result's Status (or the Rejected count). A *contracts.Problem error means
// the whole batch was refused (empty, too many tasks, body too large,
// malformed JSON, server failure) and nothing was written; after a transport
// error the outcome is unknown, and resubmitting is safe only for tasks that
// carry a biz_key.
func (c *Client) SubmitBatch(ctx context.Context, req contracts.BatchRequest) (*contracts.BatchResponse, error) {
	var out contracts.BatchResponse
	if err := c.do(ctx, http.MethodPost, "/v1/tasks:batch", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
