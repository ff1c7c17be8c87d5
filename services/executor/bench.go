package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/events"
)

// TypeBench is the built-in type the `ax bench` harness measures ax with.
const TypeBench = "ax.bench"

// benchPayload is the optional payload of an ax.bench task.
type benchPayload struct {
	// FailAttempts makes attempts 1..FailAttempts fail with a retryable
	// error, so the retry path can be measured.
	FailAttempts int `json:"fail_attempts"`
}

// Bench does no work but tells the `ax bench` harness, with one core NATS
// message on events.SubjectBenchDone, when it started and ended. The handler
// takes those times itself because nothing else in ax records when a handler
// really ran: history rows are written around it, in other transactions. It
// fails while its attempt is at most {"fail_attempts": N}. The report is
// fire-and-forget: a benchmark must not slow down or fail the task it
// measures, and the harness counts what it did not receive.
var Bench = HandlerFunc(func(ctx context.Context, t *Task) error {
	start := time.Now()
	var p benchPayload
	var err error
	if len(t.Payload) > 0 {
		if jerr := json.Unmarshal(t.Payload, &p); jerr != nil {
			err = Permanent(fmt.Errorf("ax.bench payload: %w", jerr))
		}
	}
	if err == nil && t.Attempt <= p.FailAttempts {
		err = fmt.Errorf("ax.bench: attempt %d of the first %d fails", t.Attempt, p.FailAttempts)
	}
	end := time.Now()
	if nc := benchConnFrom(ctx); nc != nil {
		data, _ := json.Marshal(events.BenchDone{TaskID: t.ID, Attempt: t.Attempt,
			StartNs: start.UnixNano(), EndNs: end.UnixNano(), OK: err == nil})
		// Buffered by the client and flushed in the background; an error
		// (connection closed) only means the harness counts a missing report.
		_ = nc.Publish(events.SubjectBenchDone, data)
	}
	return err
})

type benchConnKey struct{}

// withBenchConn hands the executor's NATS connection to the ax.bench
// handler without widening the Handler interface for one built-in.
func withBenchConn(ctx context.Context, nc *nats.Conn) context.Context {
	if nc == nil {
		return ctx
	}
	return context.WithValue(ctx, benchConnKey{}, nc)
}

// benchConnFrom returns the connection, or nil outside an executor (in a
// unit test the handler then only succeeds or fails).
func benchConnFrom(ctx context.Context) *nats.Conn {
	nc, _ := ctx.Value(benchConnKey{}).(*nats.Conn)
	return nc
}
