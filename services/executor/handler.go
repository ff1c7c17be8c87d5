package executor

import (
	"context"
	"encoding/json"
	"time"
)

// Task is what a handler sees of a task: enough to do the work, nothing of
// scheduling, locking or concurrency.
type Task struct {
	ID      int64
	Type    string
	Attempt int
	Payload json.RawMessage
	// Hops says when this attempt passed each hop before its handler.
	Hops Hops
}

// Handler runs one task. Returning nil records SUCCESS; an error records
// FAILED with the error text. ctx carries the task's deadline and is
// cancelled when the task is cancelled or its lease is lost.
type Handler interface {
	Handle(ctx context.Context, t *Task) error
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, t *Task) error

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, t *Task) error { return f(ctx, t) }

// TypeSpec declares a task type an executor serves and the defaults it is
// registered with when it does not exist yet.
type TypeSpec struct {
	Name       string
	Handler    Handler
	Timeout    time.Duration
	MaxRetries int
	// Concurrency is how many tasks of this type this executor runs at once.
	Concurrency int
}
