// Package outbox moves committed events from MySQL's outbox table to
// JetStream.
//
// Gap safety: the relay never keeps an "id > last offset" cursor. Each pass
// locks the oldest unpublished rows with FOR UPDATE SKIP LOCKED, publishes
// them asynchronously, awaits every acknowledgement, and deletes them in the
// same transaction. A row whose transaction committed late is simply found
// by a later pass. A relay killed after publishing but before deleting
// publishes the rows again; JetStream drops them as duplicates because the
// event ID is the Nats-Msg-Id. Any number of relays (one per process that
// writes transfers) can run: SKIP LOCKED lets them share rows without
// waiting on each other.
//
// Speed: the store signals the relay after every commit that wrote an
// outbox row, so the relay works at once instead of on a poll interval; the
// poll interval only catches rows written by other processes.
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
)

// Config tunes the relay.
type Config struct {
	// Batch is the most rows one pass publishes.
	Batch int
	// PollInterval is how often the relay looks without being woken.
	PollInterval time.Duration
}

// Relay publishes outbox rows.
type Relay struct {
	cfg    Config
	store  *store.Store
	js     jetstream.JetStream
	logger *slog.Logger
}

// New builds a relay.
func New(cfg Config, st *store.Store, js jetstream.JetStream, logger *slog.Logger) *Relay {
	if cfg.Batch <= 0 {
		cfg.Batch = BatchDefault
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = PollIntervalDefault
	}
	return &Relay{cfg: cfg, store: st, js: js, logger: logger.With("component", "outbox_relay")}
}

// Run relays until ctx ends, then makes a last bounded pass so events of the
// final transfers are not left waiting for the next start.
func (r *Relay) Run(ctx context.Context) error {
	ticker := time.NewTicker(r.cfg.PollInterval)
	defer ticker.Stop()
	backoff := 100 * time.Millisecond
	for {
		n, err := r.RunOnce(ctx)
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
		if n >= r.cfg.Batch {
			continue // more waiting; no sleep
		}
		select {
		case <-ctx.Done():
			r.drain()
			return nil
		case <-r.store.Wake():
		case <-ticker.C:
		}
	}
}

func (r *Relay) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for {
		n, err := r.RunOnce(ctx)
		if err != nil || n < r.cfg.Batch {
			return
		}
	}
}

// RunOnce relays at most one batch and returns how many rows it moved.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	n, err := r.store.RelayOutbox(ctx, r.cfg.Batch, r.publish)
	if n > 0 {
		metrics.OutboxRelayed.Add(float64(n))
	}
	return n, err
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
