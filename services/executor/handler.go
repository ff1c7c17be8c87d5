package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Task is what a handler sees of a task: enough to do the work, nothing of
// scheduling, locking or concurrency.
type Task struct {
	ID      int64
	Type    string
	Attempt int
	Payload json.RawMessage
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

// Built-in task types, served by default so a deployment can be tried
// without business code.
const (
	TypeNoop  = "ax.noop"
	TypeSleep = "ax.sleep"
	TypeFlaky = "ax.flaky"
)

// Noop does nothing and succeeds.
var Noop = HandlerFunc(func(context.Context, *Task) error { return nil })

// Sleep waits {"ms": N} milliseconds, or until ctx ends.
var Sleep = HandlerFunc(func(ctx context.Context, t *Task) error {
	var p struct {
		Ms int64 `json:"ms"`
	}
	if len(t.Payload) > 0 {
		if err := json.Unmarshal(t.Payload, &p); err != nil {
			return fmt.Errorf("ax.sleep payload: %w", err)
		}
	}
	if p.Ms < 0 {
		return fmt.Errorf("ax.sleep payload: ms must not be negative, got %d", p.Ms)
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Duration(p.Ms) * time.Millisecond):
		return nil
	}
})

// Flaky fails the first {"fail_times": N} attempts, then succeeds; for
// demos and tests of retries and dead letters. {"permanent": true} makes the
// failures non-retryable.
var Flaky = HandlerFunc(func(_ context.Context, t *Task) error {
	var p struct {
		FailTimes int  `json:"fail_times"`
		Permanent bool `json:"permanent"`
	}
	if len(t.Payload) > 0 {
		if err := json.Unmarshal(t.Payload, &p); err != nil {
			return Permanent(fmt.Errorf("ax.flaky payload: %w", err))
		}
	}
	if t.Attempt <= p.FailTimes {
		err := fmt.Errorf("ax.flaky: attempt %d of the first %d fails", t.Attempt, p.FailTimes)
		if p.Permanent {
			return Permanent(err)
		}
		return err
	}
	return nil
})

// Builtins returns the built-in types with default settings.
func Builtins() []TypeSpec {
	return []TypeSpec{
		{Name: TypeNoop, Handler: Noop},
		{Name: TypeSleep, Handler: Sleep},
		{Name: TypeFlaky, Handler: Flaky},
		{Name: TypeBench, Handler: Bench},
	}
}
