package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
)

// ProgressInterval is the least time between two progress writes of one
// task: a handler may report in a tight loop, and MySQL sees at most one
// write a second per running task.
const ProgressInterval = time.Second

// Errors of SetResult and SetProgress, so a handler can tell its own
// mistake from the absence of an executor.
var (
	ErrResultTooLarge  = fmt.Errorf("task result over %d bytes", contracts.MaxResultBytes)
	ErrNotInExecutor   = errors.New("no running task in ctx: pass the ctx the executor gave the handler")
	errBadProgressPerc = errors.New("progress percent must be 0 to 100")
)

// report is what a run's handler tells about itself besides its error: a
// result kept on success, and progress written as it goes.
type report struct {
	st      *store.Store
	taskID  int64
	attempt int
	now     func() time.Time
	// claimFirst, set for a run started before its claim was written
	// (fused.go), writes the claim now: progress is fenced on RUNNING, so
	// a report made inside the window would otherwise be dropped.
	claimFirst func() error

	mu        sync.Mutex
	result    []byte
	lastWrite time.Time
}

type reportKey struct{}

func withReport(ctx context.Context, r *report) context.Context {
	return context.WithValue(ctx, reportKey{}, r)
}

func reportFrom(ctx context.Context) *report {
	r, _ := ctx.Value(reportKey{}).(*report)
	return r
}

// SetResult keeps v, encoded as JSON, as the task's result: it is stored
// with the task when the handler returns nil, in the same transaction as
// its SUCCESS, and shown by GET /v1/tasks/{id}. A json.RawMessage is taken
// as it is (it must be valid JSON). The encoding may be at most
// contracts.MaxResultBytes (64 KiB); a result is a small answer, not data.
// A later call replaces an earlier one; a failed run stores none.
func SetResult(ctx context.Context, v any) error {
	r := reportFrom(ctx)
	if r == nil {
		return ErrNotInExecutor
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode task result: %w", err)
	}
	if len(b) > contracts.MaxResultBytes {
		return fmt.Errorf("%w: %d bytes", ErrResultTooLarge, len(b))
	}
	r.mu.Lock()
	r.result = b
	r.mu.Unlock()
	return nil
}

// SetProgress reports how far the task has got: percent (0 to 100) and a
// short message (cut to 255 bytes), shown by GET /v1/tasks/{id} while it
// runs. Reports are written at most once per ProgressInterval per task; a
// report within the interval of the last written one is dropped (report
// again later, as a loop does). The write is fenced by the attempt, so a
// run that lost its task cannot overwrite its successor's progress.
func SetProgress(ctx context.Context, percent int, message string) error {
	r := reportFrom(ctx)
	if r == nil {
		return ErrNotInExecutor
	}
	if percent < 0 || percent > 100 {
		return fmt.Errorf("%w, got %d", errBadProgressPerc, percent)
	}
	r.mu.Lock()
	now := r.now()
	if !r.lastWrite.IsZero() && now.Sub(r.lastWrite) < ProgressInterval {
		r.mu.Unlock()
		return nil
	}
	r.lastWrite = now
	r.mu.Unlock()
	if r.claimFirst != nil {
		if err := r.claimFirst(); err != nil {
			return err
		}
	}
	_, err := r.st.SetProgress(ctx, store.ProgressParams{TaskID: r.taskID, Attempt: r.attempt,
		Percent: percent, Message: store.Truncate(message, contracts.MaxProgressMessageBytes)})
	return err
}

// resultOf returns what the handler set as its result, nil when nothing
// (or when r is nil: a run that never reached its handler).
func (r *report) resultOf() []byte {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.result
}
