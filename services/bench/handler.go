package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/executor"
)

// TypeBench is the task type the harness measures ax with. Executors serve
// it beside the demonstration types (--builtins, on under `ax up`).
const TypeBench = "ax.bench"

// benchPayload is the optional payload of an ax.bench task.
type benchPayload struct {
	// FailAttempts makes attempts 1..FailAttempts fail with a retryable
	// error, so the retry path can be measured.
	FailAttempts int `json:"fail_attempts"`
}

const (
	// reportBatch is the most reports one message carries.
	reportBatch = 256
	// reportWait is the longest a report waits for company.
	reportWait = time.Millisecond
)

// Handler does no work but tells the harness, over core NATS on
// events.SubjectBenchDone, when it started and ended. It takes those times
// itself because nothing else in ax records when a handler really ran:
// history rows are written around it, in other transactions. It fails while
// its attempt is at most {"fail_attempts": N}. The report is
// fire-and-forget: a benchmark must not slow down or fail the task it
// measures, and the harness counts what it did not receive. Reports travel
// in batches (a JSON array, at most reportBatch, sent within reportWait of
// the first), so measuring 10,000 tasks a second does not add 10,000
// messages a second to the machine being measured.
type Handler struct {
	nc      *nats.Conn // nil: nobody to report to
	wait    time.Duration
	mu      sync.Mutex
	pending []events.BenchDone
	timer   *time.Timer
}

// NewHandler builds the ax.bench handler reporting on nc (nil reports
// nothing; the outcome is the same).
func NewHandler(nc *nats.Conn) *Handler {
	return &Handler{nc: nc, wait: reportWait}
}

// TypeSpec is the ax.bench type served with a handler reporting on nc.
func TypeSpec(nc *nats.Conn) executor.TypeSpec {
	return executor.TypeSpec{Name: TypeBench, Handler: NewHandler(nc)}
}

// Handle runs one ax.bench task.
func (h *Handler) Handle(_ context.Context, t *executor.Task) error {
	start := time.Now()
	var p benchPayload
	var err error
	if len(t.Payload) > 0 {
		if jerr := json.Unmarshal(t.Payload, &p); jerr != nil {
			err = executor.Permanent(fmt.Errorf("ax.bench payload: %w", jerr))
		}
	}
	if err == nil && t.Attempt <= p.FailAttempts {
		err = fmt.Errorf("ax.bench: attempt %d of the first %d fails", t.Attempt, p.FailAttempts)
	}
	end := time.Now()
	if h.nc != nil {
		hp := &t.Hops
		h.add(events.BenchDone{TaskID: t.ID, Attempt: t.Attempt,
			StartNs: start.UnixNano(), EndNs: end.UnixNano(), OK: err == nil,
			CommittedNs: nsOf(hp.Committed), SentNs: nsOf(hp.Sent), StoredNs: nsOf(hp.Stored),
			FetchedNs: nsOf(hp.Fetched), ClaimedNs: nsOf(hp.Claimed)})
	}
	return err
}

// nsOf is t in Unix nanoseconds, 0 for a zero t.
func nsOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func (h *Handler) add(r events.BenchDone) {
	h.mu.Lock()
	h.pending = append(h.pending, r)
	switch {
	case len(h.pending) >= reportBatch:
		h.flushLocked()
	case len(h.pending) == 1:
		if h.timer == nil {
			h.timer = time.AfterFunc(h.wait, h.Flush)
		} else {
			h.timer.Reset(h.wait)
		}
	}
	h.mu.Unlock()
}

// Flush publishes what is pending.
func (h *Handler) Flush() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.flushLocked()
}

func (h *Handler) flushLocked() {
	if len(h.pending) == 0 {
		return
	}
	data, _ := events.Encode(h.pending)
	h.pending = h.pending[:0]
	// Buffered by the client and flushed in the background; an error
	// (connection closed) only means the harness counts missing reports.
	_ = h.nc.Publish(events.SubjectBenchDone, data)
}
