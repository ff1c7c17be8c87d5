// Package outbox moves committed events from MySQL to JetStream.
//
// Two sources: task transfers are published from task_history itself
// (store.RelayHistory: a cursor over the rows' IDs, gap-safe, advanced in
// the same transaction that read them once JetStream acknowledged every
// event), and the few other events (task type changes) from the outbox
// table (store.RelayOutbox: FOR UPDATE SKIP LOCKED, deleted once
// acknowledged). Either way nothing is published that did not commit, and a
// relay killed after publishing but before committing publishes the same
// events again, which JetStream drops as duplicates because the event ID is
// the Nats-Msg-Id. Any number of relays (one per process that writes
// transfers) can run: none holds a lock across a pass on the history cursor
// (a stalled relay must not stop the others; two at once may publish the
// same events, which JetStream keeps once), and they share outbox rows
// through SKIP LOCKED.
//
// Speed: the store signals the relay after every commit that wrote history
// or outbox rows, so the relay works at once instead of on a poll interval;
// the poll interval only catches rows written by other processes. A pass
// that a hole holds back looks again every 10 ms.
package outbox

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
)

// Defaults for Config.
const (
	BatchDefault        = 1000
	PollIntervalDefault = 250 * time.Millisecond
	// heldRetry is how soon a pass held back by a hole in the history IDs
	// looks again.
	heldRetry = 10 * time.Millisecond
)

// Config tunes the relay.
type Config struct {
	// Batch is the most rows one pass publishes.
	Batch int
	// PollInterval is how often the relay looks without being woken.
	PollInterval time.Duration
	// GapGrace is how long a hole in the history IDs holds back the rows
	// behind it before it is taken for a rolled-back transaction
	// (store.HistoryGaps).
	GapGrace time.Duration
}

// Relay publishes outbox rows.
type Relay struct {
	cfg    Config
	store  *store.Store
	js     jetstream.JetStream
	logger *slog.Logger
	gaps   *store.HistoryGaps
}

// New builds a relay.
func New(cfg Config, st *store.Store, js jetstream.JetStream, logger *slog.Logger) *Relay {
	if cfg.Batch <= 0 {
		cfg.Batch = BatchDefault
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = PollIntervalDefault
	}
	return &Relay{cfg: cfg, store: st, js: js, logger: logger.With("component", "outbox_relay"),
		gaps: store.NewHistoryGaps(cfg.GapGrace, 0)}
}

// Run relays until ctx ends, then makes a last bounded pass so events of the
// final transfers are not left waiting for the next start.
func (r *Relay) Run(ctx context.Context) error {
	ticker := time.NewTicker(r.cfg.PollInterval)
	defer ticker.Stop()
	backoff := 100 * time.Millisecond
	outbox := true // the first pass looks at the outbox too
	for {
		n, held, err := r.pass(ctx, outbox)
		switch {
		case err != nil && store.IsDeadlock(err) && ctx.Err() == nil:
			// Relay replicas deleting neighbouring rows can deadlock; the
			// victim rolled back cleanly and simply goes again.
			metrics.OutboxErrors.Inc()
			r.logger.Debug("relay pass was a deadlock victim; retrying", "err", err)
			continue
		case err != nil && ctx.Err() == nil:
			metrics.OutboxErrors.Inc()
			r.logger.Warn("relay pass failed; retrying", "err", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, 5*time.Second)
			continue
		case err == nil:
			backoff = 100 * time.Millisecond
		}
		outbox = false
		if n >= r.cfg.Batch {
			continue // more waiting; no sleep
		}
		var retry <-chan time.Time
		if held {
			retry = time.After(heldRetry)
		}
		select {
		case <-ctx.Done():
			r.drain()
			return nil
		case <-r.store.Wake():
			outbox = r.store.OutboxWritten()
		case <-retry:
		case <-ticker.C:
			outbox = true
		}
	}
}

func (r *Relay) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		n, held, err := r.pass(ctx, true)
		if err != nil {
			return
		}
		if held {
			time.Sleep(heldRetry)
			continue
		}
		if n < r.cfg.Batch {
			return
		}
	}
}

// RunOnce relays at most one batch of history events and one of outbox rows
// and returns how many events it published.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	n, _, err := r.pass(ctx, true)
	return n, err
}

// pass relays one batch of history events and, when asked, one of outbox
// rows; held reports a hole in the history IDs holding rows back. n is the
// larger of the two batches, so a full one makes the caller go again.
func (r *Relay) pass(ctx context.Context, outbox bool) (n int, held bool, err error) {
	res, err := r.store.RelayHistory(ctx, r.cfg.Batch, r.gaps, r.publish)
	if err != nil {
		return 0, false, err
	}
	metrics.OutboxRelayed.Add(float64(res.Relayed))
	n = res.Relayed
	if res.Full && !res.Held {
		n = r.cfg.Batch
	}
	if outbox {
		m, err := r.store.RelayOutbox(ctx, r.cfg.Batch, r.publish)
		metrics.OutboxRelayed.Add(float64(m))
		if err != nil {
			return n, res.Held, err
		}
		n = max(n, m)
	}
	return n, res.Held, nil
}

func (r *Relay) publish(ctx context.Context, rows []store.OutboxRow) error {
	msgs := make([]bus.Msg, len(rows))
	for i, row := range rows {
		msgs[i] = bus.Msg{
			Subject: row.Subject, ID: row.EventID, EventType: row.EventType,
			CorrelationID: row.CorrelationID, Data: row.Payload,
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return bus.PublishBatch(pctx, r.js, msgs)
}
