package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
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

// Bench does no work but tells the `ax bench` harness, over core NATS on
// events.SubjectBenchDone, when it started and ended. The handler takes
// those times itself because nothing else in ax records when a handler
// really ran: history rows are written around it, in other transactions. It
// fails while its attempt is at most {"fail_attempts": N}. The report is
// fire-and-forget: a benchmark must not slow down or fail the task it
// measures, and the harness counts what it did not receive. Reports travel
// in batches (a JSON array, at most benchReportBatch, sent within
// benchReportWait of the first), so measuring 10,000 tasks a second does
// not add 10,000 messages a second to the machine being measured.
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
	if br := benchReporterFrom(ctx); br != nil {
		br.add(events.BenchDone{TaskID: t.ID, Attempt: t.Attempt,
			StartNs: start.UnixNano(), EndNs: end.UnixNano(), OK: err == nil})
	}
	return err
})

const (
	// benchReportBatch is the most reports one message carries.
	benchReportBatch = 256
	// benchReportWait is the longest a report waits for company.
	benchReportWait = time.Millisecond
)

// benchReporter gathers ax.bench reports and publishes them in batches.
type benchReporter struct {
	nc      *nats.Conn
	wait    time.Duration // benchReportWait; longer in tests
	mu      sync.Mutex
	pending []events.BenchDone
	timer   *time.Timer
}

func newBenchReporter(nc *nats.Conn) *benchReporter {
	return &benchReporter{nc: nc, wait: benchReportWait}
}

func (b *benchReporter) add(r events.BenchDone) {
	b.mu.Lock()
	b.pending = append(b.pending, r)
	switch {
	case len(b.pending) >= benchReportBatch:
		b.flushLocked()
	case len(b.pending) == 1:
		if b.timer == nil {
			b.timer = time.AfterFunc(b.wait, b.flush)
		} else {
			b.timer.Reset(b.wait)
		}
	}
	b.mu.Unlock()
}

// flush publishes what is pending (an executor calls it on its way out).
func (b *benchReporter) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.flushLocked()
}

func (b *benchReporter) flushLocked() {
	if len(b.pending) == 0 {
		return
	}
	data, _ := events.Encode(b.pending)
	b.pending = b.pending[:0]
	// Buffered by the client and flushed in the background; an error
	// (connection closed) only means the harness counts missing reports.
	_ = b.nc.Publish(events.SubjectBenchDone, data)
}

type benchReporterKey struct{}

// withBenchReporter hands the executor's reporter to the ax.bench handler
// without widening the Handler interface for one built-in.
func withBenchReporter(ctx context.Context, br *benchReporter) context.Context {
	return context.WithValue(ctx, benchReporterKey{}, br)
}

// benchReporterFrom returns the reporter, or nil outside an executor (in a
// unit test the handler then only succeeds or fails).
func benchReporterFrom(ctx context.Context) *benchReporter {
	br, _ := ctx.Value(benchReporterKey{}).(*benchReporter)
	return br
}
