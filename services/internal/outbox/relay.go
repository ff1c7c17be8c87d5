// Package outbox moves committed events from MySQL to JetStream.
//
// Two sources: task transfers are published from task_history itself
// (store.RelayHistory: a cursor over the rows' IDs, gap-safe), and the few
// other events (task type changes) from the outbox table (store.RelayOutbox:
// FOR UPDATE SKIP LOCKED, deleted once acknowledged). Either way nothing is
// published that did not commit, and events published again after a crash
// are dropped by JetStream as duplicates, because the event ID is the
// Nats-Msg-Id (transfers of one subject travel together, up to
// Config.EventsPerMessage: see appendEvents for how a message of several is
// named, and when a transfer can be stored twice).
//
// Every process that writes transfers runs a relay; one of them at a time,
// the holder of a time-bounded lease on the history cursor (a row value on
// the MySQL clock, never a held lock), walks task_history. The holder keeps
// the cursor in memory, so a pass is one read and one publish, and stores
// it when it renews the lease (every third of LeaseTTL) and when it stops.
// A holder that stops without releasing (killed, frozen) holds events back
// until its lease lapses; a standby then takes over from the stored cursor,
// publishing again what the holder had not stored yet. Outbox rows are
// shared by every relay through SKIP LOCKED.
//
// Tasks due the moment they became READY (events.RouteDispatch: submitted
// without a delay, or handed back by an executor) are dispatched by the
// relay itself when it has a dispatch.Sender (direct dispatch, see package
// dispatch): their dispatches go out in the same batch as their events,
// before the cursor moves past them, so a crash in between publishes both
// again (the executor's claim, fenced on the attempt, absorbs the repeat)
// and no such task is left behind. The dispatcher never sees them: one
// hop, one delivery and one acknowledgement fewer per task.
//
// Speed: the store signals its relay after every commit that wrote history
// or outbox rows, so the relay works at once instead of on a poll interval.
// A standby passes the signal on to the holder over core NATS
// (events.SubjectRelayWake), so transfers written in any process are
// published at once too; the poll interval is only the safety net. A pass
// that a hole holds back looks again every 10 ms.
package outbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/dispatch"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
)

// Defaults for Config.
const (
	BatchDefault        = 1000
	PollIntervalDefault = 250 * time.Millisecond
	LeaseTTLDefault     = 3 * time.Second
	// heldRetry is how soon a pass held back by a hole in the history IDs
	// looks again.
	heldRetry = 10 * time.Millisecond
	// failedPassWait is the pause after a failed pass, doubled after each
	// further failure up to failedPassWaitMax.
	failedPassWait    = 100 * time.Millisecond
	failedPassWaitMax = 5 * time.Second
	// passTimeout bounds one pass: its lease statement, one batch read and
	// the publish of that batch (itself bounded to 10 s).
	passTimeout = 30 * time.Second
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
	// NoGapTracking turns the gap tracker off (store.HistoryGaps): the
	// relay publishes a history row only once it saw a row at or past its
	// ID Settle ago, and takes every hole below for a rollback. Simpler,
	// slower by Settle, and safe only while every transaction that writes
	// history commits within Settle.
	NoGapTracking bool
	// Settle is how far the relay without gap tracking stays behind the
	// newest row (default store.SettleDefault, 1 s).
	Settle time.Duration
	// LeaseTTL is how long the history lease lasts without renewal: how
	// long a holder that died without releasing it holds events back.
	LeaseTTL time.Duration
	// Holder names this relay in the lease; unique per process (default:
	// HolderName of the host name).
	Holder string
	// EventsPerMessage is the most transfers of one subject published in
	// one message (events.TaskTransfers; default EventsPerMessageDefault);
	// 1 publishes every transfer alone (events.TaskTransferred), for
	// consumers that predate TaskTransfers.
	EventsPerMessage int
	// Dispatch, when set, dispatches the tasks of READY events due at once
	// (events.RouteDispatch) with their events; the caller keeps its
	// routing current (dispatch.Sender.Run). Every process's relay has one
	// in ax; without it nobody dispatches those tasks.
	Dispatch *dispatch.Sender
}

// Relay publishes outbox rows.
type Relay struct {
	cfg    Config
	store  *store.Store
	conn   *bus.Conn
	logger *slog.Logger
	gaps   *store.HistoryGaps
	// remote carries wake signals from the other processes' relays.
	remote chan struct{}

	// The lease, owned by the goroutine that runs passes.
	held bool
	// cursor is where the history walk is; stored at every renewal.
	cursor int64
	// renewAt is when the lease is renewed next; validUntil is when, on
	// this process's clock, it may have lapsed (it is taken to be lost
	// then, whatever MySQL says later).
	renewAt, validUntil time.Time
	// nextTake is when a standby tries to take the lease again.
	nextTake time.Time
	// regrouped is how the transfers of a publish that failed travelled
	// together (regroup), kept for the next attempt; nil after a publish
	// of transfers went through.
	regrouped map[string]int
	// fault, set only by tests, fails a publish before (fault(false)) or
	// after (fault(true)) JetStream acknowledged it.
	fault func(acked bool) error
}

// New builds a relay.
func New(cfg Config, st *store.Store, conn *bus.Conn, logger *slog.Logger) *Relay {
	if cfg.Batch <= 0 {
		cfg.Batch = BatchDefault
	}
	if cfg.EventsPerMessage <= 0 {
		cfg.EventsPerMessage = EventsPerMessageDefault
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = PollIntervalDefault
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = LeaseTTLDefault
	}
	if cfg.Settle <= 0 {
		cfg.Settle = store.SettleDefault
	}
	if cfg.Holder == "" {
		host, _ := os.Hostname()
		cfg.Holder = HolderName(host)
	}
	return &Relay{cfg: cfg, store: st, conn: conn, logger: logger.With("component", "outbox_relay", "holder", cfg.Holder),
		gaps: newGaps(cfg), remote: make(chan struct{}, 1)}
}

func newGaps(cfg Config) *store.HistoryGaps {
	g := store.NewHistoryGaps(cfg.GapGrace, 0)
	if cfg.NoGapTracking {
		g.Settle = cfg.Settle
	}
	return g
}

// HolderName names a relay for the lease: node plus a random suffix, so
// a restarted process (or two that share a node name) is never mistaken
// for the holder that went before it.
func HolderName(node string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return node + "/" + hex.EncodeToString(b)
}

// Run relays until ctx ends, then makes a last bounded pass so events of the
// final transfers are not left waiting for the next start, and releases
// the lease.
func (r *Relay) Run(ctx context.Context) error {
	sub, err := r.conn.NC.Subscribe(events.SubjectRelayWake, func(*nats.Msg) {
		select {
		case r.remote <- struct{}{}:
		default:
		}
	})
	if err != nil {
		// Not fatal: the poll interval still finds other processes' rows.
		r.logger.Warn("cannot listen for relay wake-ups", "err", err)
	} else {
		defer func() { _ = sub.Unsubscribe() }()
	}
	ticker := time.NewTicker(r.cfg.PollInterval)
	defer ticker.Stop()
	outbox := true // the first pass looks at the outbox too
	for {
		n, held := r.passUntilDone(ctx, outbox)
		outbox = false
		if n >= r.cfg.Batch {
			continue // more waiting; no sleep
		}
		var retry <-chan time.Time
		if held {
			retry = time.After(heldRetry)
		}
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				r.drain()
				return nil
			case <-r.store.Wake():
				outbox = r.store.OutboxWritten()
				if !r.held {
					r.wakeHolder()
				}
				waiting = false
			case <-r.remote:
				// Another process wrote history: only the holder cares.
				waiting = !r.held
			case <-retry:
				waiting = false
			case <-ticker.C:
				outbox = true
				waiting = false
			}
		}
	}
}

// passUntilDone makes a pass, going again until one succeeds or ctx ends,
// and returns what the successful pass relayed. A deadlock victim goes again
// at once: relay replicas deleting neighbouring outbox rows can deadlock,
// and the victim rolled back cleanly. Any other failure (MySQL or NATS
// unreachable) waits 100 ms, doubling to 5 s, before the next try; there is
// no jitter, as one relay at a time holds the history lease.
func (r *Relay) passUntilDone(ctx context.Context, outbox bool) (n int, held bool) {
	b := backoff.WithContext(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(failedPassWait), backoff.WithMaxInterval(failedPassWaitMax),
		backoff.WithRandomizationFactor(0), backoff.WithMaxElapsedTime(0)), ctx)
	_ = backoff.RetryNotify(func() error {
		for {
			var err error
			// Bounded, so a MySQL that stopped answering fails the pass
			// (and it is tried again) rather than holding it until the
			// driver's read timeout.
			pctx, cancel := context.WithTimeout(ctx, passTimeout)
			n, held, err = r.pass(pctx, outbox)
			cancel()
			if err == nil || ctx.Err() != nil || !store.IsDeadlock(err) {
				return err
			}
			metrics.OutboxErrors.Inc()
			r.logger.Debug("relay pass was a deadlock victim; retrying", "err", err)
		}
	}, b, func(err error, wait time.Duration) {
		metrics.OutboxErrors.Inc()
		r.logger.Warn("relay pass failed; retrying", "err", err, "retry_in", wait)
	})
	return n, held
}

// wakeHolder tells the relay holding the lease, in whatever process, that
// history rows were committed here.
func (r *Relay) wakeHolder() {
	if err := r.conn.NC.Publish(events.SubjectRelayWake, nil); err != nil {
		r.logger.Debug("wake the relay holding the lease", "err", err)
	}
}

func (r *Relay) drain() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	defer r.release(ctx)
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

// release stores the cursor and frees the lease for the next relay.
func (r *Relay) release(ctx context.Context) {
	if !r.held {
		return
	}
	r.held = false
	if err := r.store.ReleaseRelayLease(ctx, r.cfg.Holder, r.cursor, r.gaps); err != nil {
		r.logger.Warn("release relay lease; it lapses by itself", "err", err)
	}
}

// RunOnce relays at most one batch of history events (when it holds or
// can take the lease) and one of outbox rows, stores the cursor, and
// returns how many events it published.
func (r *Relay) RunOnce(ctx context.Context) (int, error) {
	r.nextTake = time.Time{} // a standby tries for the lease now
	n, _, err := r.pass(ctx, true)
	if err != nil || !r.held {
		return n, err
	}
	r.renewAt = time.Time{} // store the cursor now
	_, err = r.lease(ctx)
	return n, err
}

// lease keeps the history lease: takes it when free (at most every third
// of LeaseTTL), renews it and stores the cursor every third of LeaseTTL,
// and reports whether this relay may walk the history now.
func (r *Relay) lease(ctx context.Context) (bool, error) {
	now := time.Now()
	ttl := r.cfg.LeaseTTL
	if r.held {
		if now.Before(r.renewAt) && now.Before(r.validUntil) {
			return true, nil
		}
		ok, err := r.store.RenewRelayLease(ctx, r.cfg.Holder, ttl, r.cursor, r.gaps)
		switch {
		case err != nil:
			if time.Now().After(r.validUntil) {
				r.held = false
				r.logger.Warn("relay lease may have lapsed; standing by", "err", err)
			}
			return false, err
		case !ok:
			r.held = false
			r.nextTake = now.Add(ttl / 3)
			r.logger.Info("relay lease taken over by another relay; standing by")
			return false, nil
		}
		r.leased(now)
		return true, nil
	}
	if now.Before(r.nextTake) {
		return false, nil
	}
	r.nextTake = now.Add(ttl / 3)
	cursor, ok, err := r.store.TakeRelayLease(ctx, r.cfg.Holder, ttl, r.gaps)
	if err != nil || !ok {
		return false, err
	}
	// The stored position is the last holder's, this relay's own included:
	// its cursor with the holes it still watched below it. This relay may
	// have got further before it lost the lease, but what it watched then
	// is not stored, so it starts over from the stored pair, publishing
	// some events again (JetStream drops them by Nats-Msg-Id).
	r.held, r.cursor = true, cursor
	r.leased(now)
	r.logger.Info("relay lease taken", "cursor", r.cursor)
	return true, nil
}

// leased records a take or renewal that started at now: renew again in a
// third of the lease, and count it lost a tenth before MySQL would (the
// two clocks may run at slightly different rates).
func (r *Relay) leased(now time.Time) {
	ttl := r.cfg.LeaseTTL
	r.renewAt, r.validUntil = now.Add(ttl/3), now.Add(ttl-ttl/10)
}

// pass relays one batch of history events (when this relay holds the
// lease) and, when asked, one of outbox rows; held reports a hole in the
// history IDs holding rows back. n is the larger of the two batches, so a
// full one makes the caller go again.
func (r *Relay) pass(ctx context.Context, outbox bool) (n int, held bool, err error) {
	mine, err := r.lease(ctx)
	if err != nil {
		return 0, false, err
	}
	if mine {
		res, err := r.store.RelayHistory(ctx, r.cursor, r.cfg.Batch, r.gaps, r.publish)
		if err != nil {
			return 0, false, err
		}
		r.cursor = res.Next
		metrics.OutboxRelayed.Add(float64(res.Relayed))
		n, held = res.Relayed, res.Held
		if res.Full && !res.Held {
			n = r.cfg.Batch
		}
	}
	if outbox {
		m, err := r.store.RelayOutbox(ctx, r.cfg.Batch, r.publish)
		metrics.OutboxRelayed.Add(float64(m))
		if err != nil {
			return n, held, err
		}
		n = max(n, m)
	}
	return n, held, nil
}

// publish publishes rows' events and the dispatches of the tasks among
// them that are due at once (dispatches first: the executor is the one
// waiting), and returns once JetStream acknowledged every one.
func (r *Relay) publish(ctx context.Context, rows []store.OutboxRow) error {
	var tasks []dispatch.Task
	if d := r.cfg.Dispatch; d != nil {
		read := time.Now().UnixNano() // the rows were read just now
		var (
			due     []events.TaskRef
			written map[int64]int64
		)
		for _, row := range rows {
			if row.DueNow != nil {
				due = append(due, *row.DueNow)
				if written == nil {
					written = make(map[int64]int64, len(rows))
				}
				written[row.DueNow.TaskID] = row.WrittenAt.UnixNano()
			}
		}
		if len(due) > 0 {
			tasks = d.Ready(ctx, due)
			withTraces(tasks, rows)
		}
		for i := range tasks {
			t := &tasks[i].Dispatch
			t.CommittedNs, t.SentNs = written[t.TaskID], read
		}
	}
	msgs := make([]bus.Msg, 0, len(tasks)+len(rows))
	if len(tasks) > 0 {
		var err error
		if msgs, err = r.cfg.Dispatch.Messages(ctx, msgs, tasks); err != nil {
			return err
		}
	}
	dispatches := len(msgs)
	maxBytes := messageBytes(r.conn.NC.MaxPayload())
	msgs = appendEvents(msgs, rows, r.cfg.EventsPerMessage, maxBytes, r.regrouped)
	if r.fault != nil {
		if err := r.fault(false); err != nil {
			return err
		}
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := r.conn.Publish(pctx, msgs)
	if err == nil && r.fault != nil {
		err = r.fault(true)
	}
	if err != nil {
		if errors.Is(err, nats.ErrMaxPayload) {
			// The same messages would be refused again (the server's
			// max_payload fell since the pass grouped them): group afresh
			// within its bound. What was stored already may be stored
			// twice; consumers tell repeats by their event IDs.
			r.regrouped = nil
			return err
		}
		// Some messages may be stored: send the same ones next time.
		r.regrouped = regroup(rows, r.cfg.EventsPerMessage, maxBytes, r.regrouped)
		return err
	}
	if len(rows) > 0 && rows[0].EventType == events.TypeTaskTransferred {
		r.regrouped = nil
	}
	metrics.EventMessages.Add(float64(len(msgs) - dispatches))
	observeLag(rows, time.Now())
	if len(tasks) > 0 {
		r.cfg.Dispatch.Sent(ctx, tasks)
	}
	return nil
}

// observeLag records, for every acknowledged row, how long after it was
// written its event went out. A row written by a MySQL whose clock is ahead
// of this process's reads as published at once (0), not as a negative lag.
func observeLag(rows []store.OutboxRow, at time.Time) {
	for _, row := range rows {
		if row.WrittenAt.IsZero() {
			continue
		}
		metrics.RelayLag.Observe(max(at.Sub(row.WrittenAt), 0).Seconds())
	}
}

// withTraces gives the relay's dispatches their tasks' trace contexts from
// the rows they were made of.
func withTraces(tasks []dispatch.Task, rows []store.OutboxRow) {
	var traces map[int64]string
	for _, row := range rows {
		if row.DueNow != nil && row.TraceParent != "" {
			if traces == nil {
				traces = map[int64]string{}
			}
			traces[row.DueNow.TaskID] = row.TraceParent
		}
	}
	for i := range tasks {
		tasks[i].TraceParent = traces[tasks[i].Dispatch.TaskID]
		tasks[i].By = "relay"
	}
}
