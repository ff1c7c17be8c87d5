package timer

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/dispatch"
	"github.com/axsched/ax/services/internal/idgen"
	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/ready"
	"github.com/axsched/ax/services/internal/store"
)

// Defaults for Config.
const (
	IntervalDefault          = 500 * time.Millisecond
	BatchDefault             = 1000
	ReconcileIntervalDefault = 5 * time.Second
	ReconcileGraceDefault    = 5 * time.Second
	RedispatchAfterDefault   = 30 * time.Second
	ConsumersDefault         = 4
	// CoalesceDefault is how much later than the earliest remaining score
	// the loop wakes, so that one pop takes everything due by then.
	CoalesceDefault = 2 * time.Millisecond
)

// Config tunes the timer.
type Config struct {
	// Interval is the longest the loop sleeps; it wakes sooner for earlier
	// tasks.
	Interval time.Duration
	// Batch is the most IDs one pop takes.
	Batch int
	// ReconcileInterval is how often MySQL is searched for stale READY tasks.
	ReconcileInterval time.Duration
	// ReconcileGrace is how long a task may sit READY and undispatched
	// before the reconciler re-indexes it.
	ReconcileGrace time.Duration
	// RedispatchAfter is how long a dispatched but unclaimed task waits
	// before it is dispatched again.
	RedispatchAfter time.Duration
	// Consumers is how many READY events are indexed at once.
	Consumers int
	// Coalesce is how much later than the earliest remaining score the
	// loop wakes (never earlier): at high rates of delayed tasks one pop
	// then takes every task due within it instead of one per wake-up.
	// Negative means 0.
	Coalesce time.Duration
	// Dispatch, when set, hands due tasks indexed with their type and
	// attempt straight to their executors (a lean dispatch, routed,
	// pause-checked and marked as the dispatcher would) instead of sending
	// the dispatcher a due command for each; a RETRYING task first becomes
	// READY here, in one transaction per pass. Entries of an older timer (a
	// bare ID) still go to the dispatcher. The caller keeps its routing
	// current (dispatch.Sender.Run).
	Dispatch *dispatch.Sender
	// BacklogSample is how often the lanes' backlog gauges are sampled.
	BacklogSample time.Duration

	// IDs, when set, makes the timer fire schedules: it names the tasks
	// the fires create. Clock is then the scheduler clock (Redis TIME,
	// corrected), never ahead of it, so no fire is early.
	IDs   *idgen.Generator
	Clock clock.Clock
	// SchedulePoll is the longest the schedule loop sleeps; it wakes at
	// the earliest next fire time when that is sooner, and a new or
	// changed schedule's first fire is at most this late.
	SchedulePoll time.Duration
	// ScheduleGrace is how late a fire time may be found before it counts
	// as missed and its schedule's catch-up policy applies.
	ScheduleGrace time.Duration
	// ScheduleWorkers is how many fire transactions one timer runs at
	// once, each on schedules the others do not hold.
	ScheduleWorkers int
}

func (c *Config) defaults() {
	if c.Interval <= 0 {
		c.Interval = IntervalDefault
	}
	if c.Batch <= 0 {
		c.Batch = BatchDefault
	}
	if c.ReconcileInterval <= 0 {
		c.ReconcileInterval = ReconcileIntervalDefault
	}
	if c.ReconcileGrace <= 0 {
		c.ReconcileGrace = ReconcileGraceDefault
	}
	if c.RedispatchAfter <= 0 {
		c.RedispatchAfter = RedispatchAfterDefault
	}
	if c.Consumers <= 0 {
		c.Consumers = ConsumersDefault
	}
	if c.BacklogSample <= 0 {
		c.BacklogSample = BacklogSampleDefault
	}
	if c.SchedulePoll <= 0 {
		c.SchedulePoll = SchedulePollDefault
	}
	if c.ScheduleGrace <= 0 {
		c.ScheduleGrace = ScheduleGraceDefault
	}
	if c.ScheduleWorkers <= 0 {
		c.ScheduleWorkers = ScheduleWorkersDefault
	}
	switch {
	case c.Coalesce == 0:
		c.Coalesce = CoalesceDefault
	case c.Coalesce < 0:
		c.Coalesce = 0
	}
}

// Timer is the timer service.
type Timer struct {
	cfg    Config
	store  *store.Store
	rdb    redis.UniversalClient
	keys   keys.Keys
	conn   *bus.Conn
	logger *slog.Logger
	// types gives fires their type's current defaults.
	types *store.TypeCache

	wake     chan struct{}
	nextWake atomic.Int64 // Redis-clock ms the loop plans to wake at
	// ready opens when the READY and RETRYING consumers are pulling and
	// the type-change router runs.
	ready *ready.Gate
	// fireTxs counts the schedule transactions begun (FireDue).
	fireTxs atomic.Int64
}

// New builds a timer.
func New(cfg Config, st *store.Store, rdb redis.UniversalClient, k keys.Keys, conn *bus.Conn, logger *slog.Logger) *Timer {
	cfg.defaults()
	return &Timer{cfg: cfg, store: st, rdb: rdb, keys: k, conn: conn, types: store.NewTypeCache(st, time.Second, nil),
		logger: logger.With("service", "timer"), wake: make(chan struct{}, 1), ready: ready.New(3)}
}

// Run indexes READY events, pops due tasks and reconciles until ctx ends.
func (t *Timer) Run(ctx context.Context) error {
	if _, err := t.ensureIndex(ctx); err != nil {
		return err
	}
	router, err := bus.NewRouter(t.logger)
	if err != nil {
		return err
	}
	err = bus.AddConsumer(router, t.conn, bus.ConsumerSpec{
		Name: events.ConsumerTimerTypes, Stream: events.StreamEvents,
		Subject: events.SubjectTypeChanged, Parallel: 1,
	}, t.logger, t.handleTypeChanged)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return router.Run(gctx) })
	g.Go(func() error {
		select {
		case <-router.Running():
			t.ready.Done()
		case <-gctx.Done():
		}
		return nil
	})
	g.Go(func() error {
		return bus.ConsumeBatches(gctx, t.conn.JS, bus.ConsumerSpec{
			Name: events.ConsumerTimer, Stream: events.StreamEvents,
			Subject: events.TaskEventSubject(contracts.StatusReady), Parallel: t.cfg.Consumers, Declared: t.ready.Done,
		}, indexBatch, t.logger, t.handleReady)
	})
	g.Go(func() error {
		return bus.ConsumeBatches(gctx, t.conn.JS, bus.ConsumerSpec{
			Name: events.ConsumerTimerRetrying, Stream: events.StreamEvents,
			Subject: events.TaskEventSubject(contracts.StatusRetrying), Parallel: 2, Declared: t.ready.Done,
		}, indexBatch, t.logger, t.handleReady)
	})
	g.Go(func() error { return t.loop(gctx) })
	g.Go(func() error { return t.reconcileLoop(gctx) })
	g.Go(func() error { return t.backlogLoop(gctx) })
	if t.cfg.IDs != nil && t.cfg.Clock != nil {
		g.Go(func() error { return t.fireLoop(gctx) })
	}
	return g.Wait()
}

// indexBatch bounds how many READY/RETRYING events one Redis pipeline
// indexes.
const indexBatch = 512

// statementTimeout bounds each MySQL statement of the timer's loops (a
// page of a rebuild or a reconcile, the end of a batch of backoffs): a
// MySQL that stopped answering fails the pass, which is tried again,
// instead of holding it until the driver's read timeout.
const statementTimeout = 10 * time.Second

// Ready is closed once the timer consumes READY and RETRYING events and
// type changes.
func (t *Timer) Ready() <-chan struct{} { return t.ready.Ready() }

// handleReady indexes the tasks of READY and RETRYING events in one
// pipeline, however many a message carries (events.ReadTransfers);
// undecodable events are dropped (the reconciler finds their
// tasks in MySQL). READY events of tasks due at once travel on
// events.SubjectReadyNow, which the timer does not consume; a relay of an
// older version still publishes them on this subject, and they are passed
// over by their route.
func (t *Timer) handleReady(ctx context.Context, msgs []jetstream.Msg) error {
	refs := make([]store.DueRef, 0, len(msgs))
	var evs []events.TaskRef
	for _, m := range msgs {
		h := m.Headers()
		var err error
		if evs, err = events.ReadTransfers(h.Get(events.HeaderEventType), m.Data(), evs[:0]); err != nil {
			t.logger.Error("dropping undecodable READY event", "subject", m.Subject(), "err", err)
			continue
		}
		for _, ev := range evs {
			if ev.To != contracts.StatusReady && ev.To != contracts.StatusRetrying {
				continue
			}
			if ev.To == contracts.StatusReady && ev.Route != events.RouteTimer {
				// Due at once, from an older relay (the relay dispatched it
				// with this event, or its writer had).
				metrics.TimerSkipped.Inc()
				continue
			}
			// A transfer with a trace context travels alone, so the
			// message's header is its own.
			refs = append(refs, store.DueRef{ID: ev.TaskID, Priority: ev.Priority, NextRunTimeMs: ev.NextRunTimeMs,
				Type: ev.Type, Attempt: ev.Attempt, Status: ev.To, TraceParent: h.Get(events.HeaderTraceParent)})
		}
	}
	if err := t.Index(ctx, refs); err != nil {
		return err
	}
	traceIndexed(refs)
	return nil
}

// handleTypeChanged re-indexes the waiting tasks of a type that is not
// paused (any more): while paused the dispatcher dropped its due commands.
func (t *Timer) handleTypeChanged(msg *message.Message) error {
	var ev events.TaskTypeChanged
	if err := events.Decode(msg.Payload, &ev); err != nil {
		t.logger.Error("dropping undecodable type event", "event_id", msg.UUID, "err", err)
		return nil
	}
	if ev.Paused {
		return nil
	}
	n, err := t.ReindexType(msg.Context(), ev.Name)
	if err != nil {
		return err
	}
	if n > 0 {
		t.logger.Info("re-indexed tasks of resumed type", "type", ev.Name, "count", n)
	}
	return nil
}

// ReindexType adds every READY task of a type to the lanes; ZADD keeps it
// idempotent for tasks already there.
func (t *Timer) ReindexType(ctx context.Context, taskType string) (int, error) {
	var after *store.DueRef
	total := 0
	for {
		pctx, cancel := context.WithTimeout(ctx, statementTimeout)
		page, err := t.store.ReadyOfType(pctx, taskType, after, rebuildPage)
		cancel()
		if err != nil {
			return total, err
		}
		if err := t.Index(ctx, page); err != nil {
			return total, err
		}
		total += len(page)
		if len(page) < rebuildPage {
			return total, nil
		}
		after = &page[len(page)-1]
	}
}

// Index adds READY tasks to their lanes and wakes the loop when one is due
// before it planned to wake.
func (t *Timer) Index(ctx context.Context, refs []store.DueRef) error {
	if len(refs) == 0 {
		return nil
	}
	// One ZADD per lane, highest lane first: a pop that runs between the
	// pipeline's commands (a page of due tasks being re-indexed on resume)
	// sees whole lanes, higher ones first, and never dispatches a lower
	// lane's task ahead of a higher one indexed in the same call.
	lanes := make([][]redis.Z, len(contracts.Priorities))
	earliest := int64(-1)
	for _, r := range refs {
		rank := r.Priority.Rank()
		if rank < 0 {
			rank = contracts.PriorityNormal.Rank()
		}
		lanes[rank] = append(lanes[rank], redis.Z{Score: float64(r.NextRunTimeMs), Member: member(r)})
		if earliest < 0 || r.NextRunTimeMs < earliest {
			earliest = r.NextRunTimeMs
		}
	}
	pipe := t.rdb.Pipeline()
	for rank, zs := range lanes {
		if len(zs) > 0 {
			pipe.ZAdd(ctx, t.keys.Lane(contracts.Priorities[rank]), zs...)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("index %d ready tasks: %w", len(refs), err)
	}
	metrics.TimerIndexed.Add(float64(len(refs)))
	if earliest+t.cfg.Coalesce.Milliseconds() < t.nextWake.Load() {
		t.Wake()
	}
	return nil
}

// Wake makes the loop pop now.
func (t *Timer) Wake() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

func (t *Timer) loop(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-t.wake:
		}
		sleep, err := t.RunOnce(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			t.logger.Warn("timer pass failed", "err", err)
			sleep = t.cfg.Interval
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(sleep)
	}
}

// RunOnce pops due tasks, publishes them, and returns how long to sleep.
func (t *Timer) RunOnce(ctx context.Context) (time.Duration, error) {
	res, err := popScript.Run(ctx, t.rdb, append([]string{t.keys.Generation()}, t.keys.Lanes()...), t.cfg.Batch).Slice()
	if err != nil {
		return 0, fmt.Errorf("pop due tasks: %w", err)
	}
	if len(res) == 1 {
		rebuilt, err := t.ensureIndex(ctx)
		if err != nil {
			return 0, err
		}
		if !rebuilt {
			// Another replica is rebuilding; try again shortly.
			return 50 * time.Millisecond, nil
		}
		return 0, nil
	}
	now, next := toInt(res[0]), toInt(res[1])
	var (
		msgs     []bus.Msg
		direct   []dispatch.Task
		retrying []dispatch.Task
		popped   int
		paused   *dispatch.Pauses
	)
	for i := 2; i+2 < len(res); i += 3 {
		popped++
		lane := contracts.PriorityFromRank(int(toInt(res[i])))
		ref, err := parseMember(fmt.Sprint(res[i+1]))
		if err != nil {
			// The reconciler finds the task in MySQL if it is one.
			t.logger.Error("dropping malformed lane member", "member", res[i+1], "err", err)
			continue
		}
		metrics.TimerDue.WithLabelValues(string(lane)).Inc()
		score := toInt(res[i+2])
		metrics.TimerLoopDelay.Observe(float64(max(now-score, 0)) / 1000)
		if d := t.cfg.Dispatch; d != nil && ref.Type != "" &&
			(ref.Status == contracts.StatusReady || ref.Status == contracts.StatusRetrying) {
			// Due by the Redis clock, which the pop read: nothing to wait
			// for. The claim (and for a RETRYING task the transfer to READY
			// first) is fenced on this attempt and on the score, so a task
			// that moved on or was re-scheduled since loses there.
			if paused == nil {
				paused = d.Pauses()
			}
			if paused.Held(ctx, ref.Type) {
				continue // stays as it is; resuming the type re-indexes it
			}
			task := dispatch.Task{Lane: lane, Dispatch: events.TaskDispatched{
				TaskID: ref.ID, Type: ref.Type, Attempt: ref.Attempt, NextRunTimeMs: score, Load: true},
				TraceParent: ref.TraceParent, By: "timer"}
			if ref.Status == contracts.StatusRetrying {
				retrying = append(retrying, task)
			} else {
				direct = append(direct, task)
			}
			continue
		}
		msgs = append(msgs, dueCommand(events.TaskDue{TaskID: ref.ID, Priority: lane, NextRunTimeMs: score,
			Type: ref.Type, Attempt: ref.Attempt, Status: ref.Status, TraceParent: ref.TraceParent}))
	}
	if len(retrying) > 0 {
		var handOn []bus.Msg
		direct, handOn = t.endBackoffs(ctx, direct, retrying)
		msgs = append(msgs, handOn...)
	}
	if len(direct) > 0 {
		if msgs, err = t.cfg.Dispatch.Messages(ctx, msgs, direct); err != nil {
			return 0, err
		}
	}
	if len(msgs) > 0 {
		if err := t.conn.Publish(ctx, msgs); err != nil {
			// The IDs left Redis; the reconciler finds them in MySQL.
			return 0, fmt.Errorf("publish %d due tasks: %w", len(msgs), err)
		}
		if len(direct) > 0 {
			t.cfg.Dispatch.Sent(ctx, direct)
		}
	}
	if popped >= t.cfg.Batch {
		t.nextWake.Store(now)
		return 0, nil
	}
	sleep := t.cfg.Interval
	wakeAt := now + sleep.Milliseconds()
	if next >= 0 && next+t.cfg.Coalesce.Milliseconds() < wakeAt {
		wakeAt = next + t.cfg.Coalesce.Milliseconds()
		sleep = time.Duration(wakeAt-now) * time.Millisecond
	}
	t.nextWake.Store(wakeAt)
	return sleep, nil
}

// endBackoffs moves due RETRYING tasks to READY in one transaction, each
// fenced on the attempt and due time it was indexed with (a task cancelled,
// re-scheduled or moved on by a racing dispatcher since loses there), and
// returns direct with those that moved, to be dispatched in this pass (their
// READY events say so: RouteDispatched). If the transaction fails they are
// handed to the dispatcher as due commands instead, which tries the same.
func (t *Timer) endBackoffs(ctx context.Context, direct, retrying []dispatch.Task) ([]dispatch.Task, []bus.Msg) {
	chains := make([][]store.TransferParams, len(retrying))
	for i, r := range retrying {
		attempt, dueBy := r.Dispatch.Attempt, r.Dispatch.NextRunTimeMs
		chains[i] = []store.TransferParams{{
			TaskID: r.Dispatch.TaskID, From: contracts.StatusRetrying, To: contracts.StatusReady,
			Attempt: &attempt, DueByMs: &dueBy, Route: events.RouteDispatched, Reason: "backoff elapsed",
		}}
	}
	// Bounded, so a MySQL that stopped answering sends these tasks to the
	// dispatcher rather than stopping the pops until the driver's read
	// timeout.
	bctx, cancel := context.WithTimeout(ctx, statementTimeout)
	out, err := t.store.TransferBatch(bctx, chains)
	cancel()
	if err != nil {
		t.logger.Warn("ending backoffs failed; handing the tasks to the dispatcher", "tasks", len(retrying), "err", err)
		msgs := make([]bus.Msg, 0, len(retrying))
		for _, r := range retrying {
			d := r.Dispatch
			msgs = append(msgs, dueCommand(events.TaskDue{TaskID: d.TaskID, Priority: r.Lane, NextRunTimeMs: d.NextRunTimeMs,
				Type: d.Type, Attempt: d.Attempt, Status: contracts.StatusRetrying}))
		}
		return direct, msgs
	}
	for i, r := range retrying {
		if out[i].Err != nil {
			metrics.DispatchSkipped.WithLabelValues("not_ready").Inc()
			continue
		}
		direct = append(direct, r)
	}
	return direct, nil
}

// dueCommand is the message that hands due to the dispatcher.
func dueCommand(due events.TaskDue) bus.Msg {
	data, _ := events.Encode(due) // a struct of plain fields always encodes
	return bus.Msg{Subject: events.SubjectDue, EventType: events.TypeTaskDue,
		CorrelationID: strconv.FormatInt(due.TaskID, 10), Data: data, TraceParent: due.TraceParent}
}

func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		f, _ := strconv.ParseFloat(x, 64)
		return int64(f)
	default:
		return 0
	}
}
