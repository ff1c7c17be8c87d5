// Package retry is ax's one retry policy, shared by the executor (a handler
// failed or timed out) and the reaper (a silent attempt ran past its
// timeout): exponential backoff with 0-50 % added jitter while retries
// remain, then FAILED for good with a dead letter.
package retry

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
)

// Defaults when a type has no backoff configured.
const (
	BaseDefault = time.Second
	CapDefault  = 10 * time.Minute
)

// Delay is the wait before retry n (0 for the first): base·2ⁿ, capped,
// plus a random 0-50 % of it, so retries of many tasks that failed together
// spread out instead of returning as a herd. jitter returns [0, 1); nil
// means math/rand.
//
// It is computed here rather than with backoff.ExponentialBackOff: the delay
// is stored as the task's due time and honoured by the timer, not slept on,
// so it must be a pure function of the retry number and the jitter source
// (the library's BackOff is a stateful iterator stepped once per wait), and
// its jitter is upwards only (the library's is symmetric around the
// interval and draws from its own random source).
func Delay(n int, base, cap time.Duration, jitter func() float64) time.Duration {
	if base <= 0 {
		base = BaseDefault
	}
	if cap < base {
		cap = base
	}
	d := cap
	n = max(n, 0)
	// Doubling n times stays under cap only while base·2ⁿ does; checking
	// before shifting keeps a large n from overflowing.
	if n < 63 && base <= cap>>n {
		d = base << n
	}
	if jitter == nil {
		jitter = rand.Float64
	}
	return d + time.Duration(jitter()*0.5*float64(d))
}

// Policy is a task type's failure handling.
type Policy struct {
	BackoffBase  time.Duration
	BackoffCap   time.Duration
	FailSilently bool
}

// PolicyOf reads the policy from a type's stored settings.
func PolicyOf(t *store.TaskType) Policy {
	if t == nil {
		return Policy{}
	}
	return Policy{
		BackoffBase:  time.Duration(t.BackoffBaseMs) * time.Millisecond,
		BackoffCap:   time.Duration(t.BackoffCapMs) * time.Millisecond,
		FailSilently: t.FailSilently,
	}
}

// Failure is one attempt that did not succeed.
type Failure struct {
	TaskID     int64
	Type       string
	Attempt    int
	RetryCount int
	MaxRetries int
	// Status is FAILED or TIMEOUT.
	Status contracts.Status
	Error  string
	// Permanent skips the retries left (a non-retryable error).
	Permanent bool
	// Reason explains the failing transfer in history.
	Reason string
	Actor  string
}

// Plan returns the transfers, to run in one transaction, that record f:
// RUNNING -> FAILED/TIMEOUT, then -> RETRYING due after the backoff while
// retries remain (and on to READY in the same transaction when the backoff
// has passed by its commit: store.TransferParams.ReadyWhenDue); otherwise the task stays FAILED/TIMEOUT for good with a
// dead letter (none for fail-silently types). Every step is fenced by the
// attempt.
func Plan(f Failure, p Policy, nowMs int64, jitter func() float64) []store.TransferParams {
	attempt := f.Attempt
	msg := f.Error
	fail := store.TransferParams{
		TaskID: f.TaskID, From: contracts.StatusRunning, To: f.Status, Attempt: &attempt,
		Reason: f.Reason, Actor: f.Actor, LastError: &msg, RecordRejection: true,
	}
	if !f.Permanent && f.RetryCount < f.MaxRetries {
		delay := Delay(f.RetryCount, p.BackoffBase, p.BackoffCap, jitter)
		due := nowMs + delay.Milliseconds()
		return []store.TransferParams{fail, {
			TaskID: f.TaskID, From: f.Status, To: contracts.StatusRetrying, Attempt: &attempt,
			IncrementRetry: true, NextRunTimeMs: &due, Actor: f.Actor, ClearExecutor: true, ReadyWhenDue: true,
			Reason: fmt.Sprintf("retry %d of %d in %s", f.RetryCount+1, f.MaxRetries, delay.Round(time.Millisecond)),
		}}
	}
	switch {
	case f.Permanent:
		fail.Reason += " (not retryable)"
	default:
		fail.Reason += fmt.Sprintf(" (no retries left of %d)", f.MaxRetries)
	}
	if !p.FailSilently {
		fail.Also = store.InsertDeadLetter(store.NewDeadLetter{
			TaskID: f.TaskID, Type: f.Type, Status: f.Status, Attempt: f.Attempt,
			RetryCount: f.RetryCount, LastError: f.Error,
		})
	}
	return []store.TransferParams{fail}
}
