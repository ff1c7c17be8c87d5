// Package demo holds the demonstration task types `ax up` serves so ax can
// be tried before any business handler exists: ax.noop, ax.sleep and
// ax.flaky. Production executors serve them only when asked to
// (--builtins), so a deployment never runs work nobody wrote.
package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/axsched/ax/services/executor"
)

// The demonstration task types.
const (
	TypeNoop  = "ax.noop"
	TypeSleep = "ax.sleep"
	TypeFlaky = "ax.flaky"
)

// Noop does nothing and succeeds.
var Noop = executor.HandlerFunc(func(context.Context, *executor.Task) error { return nil })

// Sleep waits {"ms": N} milliseconds, or until ctx ends.
var Sleep = executor.HandlerFunc(func(ctx context.Context, t *executor.Task) error {
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
	timer := time.NewTimer(time.Duration(p.Ms) * time.Millisecond)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
})

// Flaky fails the first {"fail_times": N} attempts, then succeeds; for
// demos and tests of retries and dead letters. {"permanent": true} makes the
// failures non-retryable.
var Flaky = executor.HandlerFunc(func(_ context.Context, t *executor.Task) error {
	var p struct {
		FailTimes int  `json:"fail_times"`
		Permanent bool `json:"permanent"`
	}
	if len(t.Payload) > 0 {
		if err := json.Unmarshal(t.Payload, &p); err != nil {
			return executor.Permanent(fmt.Errorf("ax.flaky payload: %w", err))
		}
	}
	if t.Attempt <= p.FailTimes {
		err := fmt.Errorf("ax.flaky: attempt %d of the first %d fails", t.Attempt, p.FailTimes)
		if p.Permanent {
			return executor.Permanent(err)
		}
		return err
	}
	return nil
})

// Types returns the demonstration types with default settings.
func Types() []executor.TypeSpec {
	return []executor.TypeSpec{
		{Name: TypeNoop, Handler: Noop},
		{Name: TypeSleep, Handler: Sleep},
		{Name: TypeFlaky, Handler: Flaky},
	}
}
