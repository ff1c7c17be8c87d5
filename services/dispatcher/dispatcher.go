// Package dispatcher turns due commands into work for executors.
//
// "Redis suggests, the database decides": it takes due commands in batches,
// re-reads their tasks in MySQL in one query and passes on only those still
// READY (or RETRYING with their backoff elapsed) and due by the scheduler
// clock; everything else is dropped and counted. A passing task is
// published on its type's executor subject with the attempt it has now, so
// only a claim against that attempt can succeed, and the batch is marked
// dispatched in Redis (one pipeline, no MySQL row touched: a mark in the
// tasks table locked the very rows the executors were claiming) so the
// timer's reconciler leaves it alone.
//
// Routing: a task goes to the owner of its shard on the consistent hash
// ring of the live executors serving its type (package route, refreshed
// from the membership registry every second), on that node's subject
// ax.work.exec.<lane>.<type>.<node token>; while no live executor serves
// the type, to the type's shared subject, which every executor of the type
// also drains. Work left on the subject of a node that is gone is moved on
// by the reaper.
//
// Replicas: any number may run; they share one durable consumer, and a
// duplicate dispatch is absorbed by the executor's lock and attempt check.
package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/ready"
	"github.com/axsched/ax/services/internal/ring"
	"github.com/axsched/ax/services/internal/route"
	"github.com/axsched/ax/services/internal/store"
)

// dueTolerance is how far ahead of the local estimate of the scheduler
// clock a popped task may be and still be waited for rather than dropped.
const dueTolerance = time.Second

// ConsumersDefault is how many due commands are handled at once by default.
const ConsumersDefault = 8

// Config tunes the dispatcher.
type Config struct {
	// Consumers is how many due commands are handled at once.
	Consumers int
	// Heartbeat is the executors' membership heartbeat interval (three
	// missed mean dead), for routing.
	Heartbeat time.Duration
	// Shards is the shard count of the types' rings (0: 64).
	Shards int
}

// Dispatcher is the dispatcher service.
type Dispatcher struct {
	ready  *ready.Gate
	router *route.Router
	rdb    redis.UniversalClient
	keys   keys.Keys
	types  *store.TypeCache
	cfg    Config
	store  *store.Store
	conn   *bus.Conn
	clock  clock.Clock
	logger *slog.Logger
}

// New builds a dispatcher.
func New(cfg Config, st *store.Store, rdb redis.UniversalClient, k keys.Keys, conn *bus.Conn, clk clock.Clock, logger *slog.Logger) *Dispatcher {
	if cfg.Consumers <= 0 {
		cfg.Consumers = ConsumersDefault
	}
	// A pause or resume reaches dispatch within a second.
	logger = logger.With("service", "dispatcher")
	return &Dispatcher{ready: ready.New(2), router: route.NewRouter(rdb, k.Nodes(), clk, cfg.Heartbeat, ring.Config{Shards: cfg.Shards}, logger), rdb: rdb, keys: k, types: store.NewTypeCache(st, time.Second), cfg: cfg, store: st, conn: conn, clock: clk, logger: logger}
}

// dueBatch bounds how many due commands one pass checks and hands on.
const dueBatch = 512

// Run consumes due commands until ctx ends.
func (d *Dispatcher) Run(ctx context.Context) error {
	if err := d.router.Refresh(ctx); err != nil {
		// Until the registry answers, work goes to the shared subjects.
		d.logger.Warn("read executor membership", "err", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return d.router.Run(gctx) })
	g.Go(func() error {
		return bus.ConsumeBatches(gctx, d.conn.JS, bus.ConsumerSpec{
			Name: events.ConsumerDispatcher, Stream: events.StreamWork,
			Subject: events.SubjectDue, Parallel: d.cfg.Consumers, Declared: d.ready.Done,
		}, dueBatch, d.logger, d.handleDue)
	})
	g.Go(func() error {
		return bus.ConsumeBatches(gctx, d.conn.JS, bus.ConsumerSpec{
			Name: events.ConsumerDispatcherReady, Stream: events.StreamEvents,
			Subject: events.TaskEventSubject(contracts.StatusReady), Parallel: d.cfg.Consumers, Declared: d.ready.Done,
		}, dueBatch, d.logger, d.handleReady)
	})
	return g.Wait()
}

// Ready is closed once the dispatcher is taking due commands.
func (d *Dispatcher) Ready() <-chan struct{} { return d.ready.Ready() }

func (d *Dispatcher) handleDue(ctx context.Context, msgs []jetstream.Msg) error {
	dues := make([]events.TaskDue, 0, len(msgs))
	for _, m := range msgs {
		var due events.TaskDue
		if err := events.Decode(m.Data(), &due); err != nil {
			d.logger.Error("dropping undecodable due command", "err", err)
			metrics.DispatchSkipped.WithLabelValues("undecodable").Inc()
			continue
		}
		dues = append(dues, due)
	}
	return d.DispatchBatch(ctx, dues)
}

// handleReady dispatches the tasks of READY events routed to the
// dispatcher (events.RouteDispatch: due when they became READY); the timer
// passes over those events. The event is the transfer itself, a moment
// old, so the task is not read back: it is handed on as a lean dispatch
// (events.TaskDispatched.Load) built from the event, and the executor's
// claim — which locks the row anyway, and succeeds only while the task is
// still READY at that attempt and due time — supplies the payload and
// settings. A paused type is still held back (cached, confirmed in MySQL).
func (d *Dispatcher) handleReady(ctx context.Context, msgs []jetstream.Msg) error {
	var (
		hs     []*handOff
		seen   = map[int64]bool{}
		paused = d.pauses()
	)
	for _, m := range msgs {
		var ev events.TaskRef
		if err := events.Decode(m.Data(), &ev); err != nil {
			d.logger.Error("dropping undecodable READY event", "err", err)
			metrics.DispatchSkipped.WithLabelValues("undecodable").Inc()
			continue
		}
		if ev.To != contracts.StatusReady || ev.Route != events.RouteDispatch {
			continue // the timer's, or dispatched by its writer
		}
		if seen[ev.TaskID] {
			metrics.DispatchSkipped.WithLabelValues("duplicate").Inc()
			continue
		}
		seen[ev.TaskID] = true
		if paused.held(ctx, ev.Type) {
			continue
		}
		hs = append(hs, &handOff{lane: ev.Priority, task: events.TaskDispatched{
			TaskID: ev.TaskID, Type: ev.Type, Attempt: ev.Attempt, NextRunTimeMs: ev.NextRunTimeMs, Load: true,
		}})
	}
	return d.handOff(ctx, hs)
}

// DispatchBatch hands the tasks of due commands that are READY (or
// RETRYING with their backoff elapsed), due and of a type that is not
// paused to the executors of their type, on the lane each was popped from
// (empty means the task's own). Everything else is dropped and counted.
//
// A lean command (events.TaskDue.Lean: the timer indexed the task with its
// type, attempt and state) is not read back: its dispatch is lean too, and
// the claim — or, for a RETRYING task, the transfer to READY here — is
// fenced on that attempt and on the indexed due time, so a task that moved
// on or was re-scheduled since loses there instead of here. Other commands
// are re-checked in one query. At most one query, one transaction, one
// batch of publishes and one Redis pipeline serve the whole batch.
func (d *Dispatcher) DispatchBatch(ctx context.Context, dues []events.TaskDue) error {
	if len(dues) == 0 {
		return nil
	}
	var ids []int64
	for _, due := range dues {
		if !due.Lean() {
			ids = append(ids, due.TaskID)
		}
	}
	tasks := map[int64]*store.DueTask{}
	if len(ids) > 0 {
		var err error
		if tasks, err = d.store.DueTasks(ctx, ids); err != nil {
			return err
		}
	}
	now := d.clock.Now().UnixMilli()
	var (
		now0, later []*handOff
		retrying    [][]store.TransferParams
		seen        = map[int64]bool{}
		paused      = d.pauses()
	)
	for _, due := range dues {
		task, lean := tasks[due.TaskID], due.Lean()
		if lean {
			task = &store.DueTask{ID: due.TaskID, Type: due.Type, Priority: due.Priority, Status: due.Status,
				Attempt: due.Attempt, NextRunTimeMs: due.NextRunTimeMs}
		}
		switch {
		case task == nil:
			metrics.DispatchSkipped.WithLabelValues("not_found").Inc()
			continue
		case seen[task.ID]:
			metrics.DispatchSkipped.WithLabelValues("duplicate").Inc()
			continue
		case task.Status != contracts.StatusReady && task.Status != contracts.StatusRetrying:
			metrics.DispatchSkipped.WithLabelValues("not_ready").Inc()
			continue
		}
		seen[task.ID] = true
		early := time.Duration(task.NextRunTimeMs-now) * time.Millisecond
		if early > dueTolerance {
			// Rescheduled since it was indexed; its READY event re-indexes it.
			metrics.DispatchSkipped.WithLabelValues("not_due").Inc()
			d.logger.Debug("task not due yet", "task_id", task.ID, "due_in", early)
			continue
		}
		if paused.held(ctx, task.Type) {
			continue
		}
		lane := due.Priority
		if lane.Rank() < 0 {
			lane = task.Priority
		}
		h := &handOff{lane: lane, task: events.TaskDispatched{
			TaskID: task.ID, Type: task.Type, Attempt: task.Attempt,
			TimeoutMs: task.TimeoutMs, NextRunTimeMs: task.NextRunTimeMs, Load: lean,
		}}
		if task.Status == contracts.StatusRetrying {
			// Its backoff has elapsed: it becomes READY (fenced, so a racing
			// dispatcher replica or a cancel wins cleanly) and goes on at once.
			attempt, dueBy := task.Attempt, task.NextRunTimeMs
			reason := "backoff elapsed"
			if !lean {
				reason = fmt.Sprintf("backoff elapsed; retry %d of %d", task.RetryCount, task.MaxRetries)
			}
			retrying = append(retrying, []store.TransferParams{{
				TaskID: task.ID, From: contracts.StatusRetrying, To: contracts.StatusReady, Attempt: &attempt,
				DueByMs: &dueBy,
				Route:   events.RouteDispatched, // dispatched below, in this very pass
				Reason:  reason,
			}})
			h.retrying = len(retrying)
		}
		if early > 0 {
			// The timer popped it by Redis TIME; our estimate of that clock
			// lags by a hair. Wait rather than start early.
			h.early = early
			later = append(later, h)
		} else {
			now0 = append(now0, h)
		}
	}
	if len(retrying) > 0 {
		out, err := d.store.TransferBatch(ctx, retrying)
		if err != nil {
			return err
		}
		keep := func(hs []*handOff) []*handOff {
			kept := hs[:0]
			for _, h := range hs {
				if h.retrying > 0 && out[h.retrying-1].Err != nil {
					metrics.DispatchSkipped.WithLabelValues("not_ready").Inc()
					continue
				}
				kept = append(kept, h)
			}
			return kept
		}
		now0, later = keep(now0), keep(later)
	}
	if err := d.handOff(ctx, now0); err != nil {
		return err
	}
	if len(later) > 0 {
		wait := time.Duration(0)
		for _, h := range later {
			wait = max(wait, h.early)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	return d.handOff(ctx, later)
}

// handOff is one task passing the dispatcher's checks.
type handOff struct {
	task events.TaskDispatched
	lane contracts.Priority
	// retrying is 1 + the index of its RETRYING -> READY chain, or 0.
	retrying int
	early    time.Duration
}

// handOff publishes the tasks to their executors' subjects, awaiting every
// acknowledgement, then marks them dispatched in Redis.
func (d *Dispatcher) handOff(ctx context.Context, hs []*handOff) error {
	if len(hs) == 0 {
		return nil
	}
	msgs := make([]bus.Msg, len(hs))
	marks := make([]redis.Z, len(hs))
	table := d.router.Table()
	now := float64(d.clock.Now().UnixMilli())
	for i, h := range hs {
		task := &h.task
		data, err := events.Encode(task)
		if err != nil {
			return fmt.Errorf("encode dispatch of task %d: %w", task.TaskID, err)
		}
		token := events.SharedToken
		if owner, ok := table.Owner(task.Type, task.TaskID); ok {
			token = events.NodeToken(owner)
		}
		id := strconv.FormatInt(task.TaskID, 10)
		msgs[i] = bus.Msg{Subject: events.ExecSubject(task.Type, h.lane, token), EventType: events.TypeTaskDispatched,
			CorrelationID: id, Data: data}
		marks[i] = redis.Z{Score: now, Member: id}
	}
	if err := bus.PublishBatch(ctx, d.conn.JS, msgs); err != nil {
		return fmt.Errorf("dispatch %d task(s): %w", len(msgs), err)
	}
	for _, h := range hs {
		metrics.Dispatched.WithLabelValues(h.task.Type).Inc()
		if h.task.Load {
			metrics.DispatchedLean.WithLabelValues(h.task.Type).Inc()
		}
	}
	if err := d.rdb.ZAdd(ctx, d.keys.Dispatched(), marks...).Err(); err != nil {
		// Only a hint is lost: the reconciler may re-drive these tasks
		// early, and the executors' fencing absorbs the duplicate.
		d.logger.Warn("mark dispatched failed", "tasks", len(marks), "err", err)
	}
	return nil
}

// pauseMemo answers, for one batch, whether a type is paused, reading each
// type once.
type pauseMemo struct {
	d     *Dispatcher
	types map[string]bool
}

func (d *Dispatcher) pauses() *pauseMemo { return &pauseMemo{d: d, types: map[string]bool{}} }

// held reports whether a task of taskType is held back by a pause, and
// counts it: it stays READY and undispatched, and resuming the type
// re-indexes it.
func (m *pauseMemo) held(ctx context.Context, taskType string) bool {
	p, known := m.types[taskType]
	if !known {
		p = m.d.paused(ctx, taskType)
		m.types[taskType] = p
	}
	if p {
		metrics.DispatchSkipped.WithLabelValues("paused").Inc()
	}
	return p
}

// paused reports whether a type is paused: "running" is believed from a
// cache at most a second old, "paused" is confirmed in MySQL. When the type
// cannot be read it is treated as not paused (the executor's claim still
// re-checks the task).
func (d *Dispatcher) paused(ctx context.Context, taskType string) bool {
	t, err := d.types.Get(ctx, taskType)
	if err != nil {
		d.logger.Warn("cannot read task type; dispatching", "type", taskType, "err", err)
		return false
	}
	if !t.Paused {
		return false
	}
	// A cached "paused" may be up to a second stale, and a resume
	// re-indexes the type's tasks at once: trusting the cache would drop
	// them again and leave them to the reconciler. Pauses are rare, so the
	// truth is read.
	t, err = d.store.GetType(ctx, taskType)
	if err != nil {
		d.logger.Warn("cannot read task type; dispatching", "type", taskType, "err", err)
		return false
	}
	return t.Paused
}
