package executor

import (
	"context"
	"time"
)

// Handlers for the executor's own tests; the demonstration types live in
// package demo, above this one.
var (
	noopHandler  = HandlerFunc(func(context.Context, *Task) error { return nil })
	sleepHandler = HandlerFunc(func(ctx context.Context, _ *Task) error {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
			return nil
		}
	})
)
