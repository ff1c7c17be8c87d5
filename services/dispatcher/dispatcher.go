// Package dispatcher is the dispatcher service. It owns the dispatch rule,
// "this task goes to that executor now" (package dispatch: pause check,
// routing to the task's shard owner on the type's ring, dispatch mark,
// fencing by attempt at the claim), and applies it to the due commands on
// ax.work.due.
//
// Most tasks never reach it: the relay and the timer apply the same rule
// directly to the tasks they know to be due (direct dispatch, see package
// dispatch). What is left here is work the reaper moved off a departed
// node's subjects, index entries of an older timer, and backoffs the timer
// failed to end.
//
// "Redis suggests, the database decides": it takes due commands in
// batches, and a task passes only while it is READY (or RETRYING) and due
// by the scheduler clock (one due within a second is waited for, never
// sent early); everything else is dropped and counted. A lean command (the
// timer indexed the task with its type, attempt and state) says so itself
// and is not read back: the executor's claim, or for a RETRYING task the
// move to READY here, is fenced on that attempt and due time, so a task
// that moved on since loses there. Any other command is re-read in MySQL,
// all of a batch's in one query. A RETRYING task is moved to READY (all of
// a batch's in one transaction) and dispatched in the same pass.
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
	"github.com/axsched/ax/services/internal/dispatch"
	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/ready"
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
	// Dispatch, when set, is the process's dispatch.Sender (shared with its
	// relay and timer; the caller keeps its routing current), and
	// Heartbeat and Shards are not used. Unset, the dispatcher builds and
	// runs its own.
	Dispatch *dispatch.Sender
}

// Dispatcher is the dispatcher service.
type Dispatcher struct {
	ready *ready.Gate
	send  *dispatch.Sender
	// ownSend is set when send is the dispatcher's own, which Run keeps
	// routing.
	ownSend bool
	cfg     Config
	store   *store.Store
	conn    *bus.Conn
	clock   clock.Clock
	logger  *slog.Logger
}

// New builds a dispatcher.
func New(cfg Config, st *store.Store, rdb redis.UniversalClient, k keys.Keys, conn *bus.Conn, clk clock.Clock, logger *slog.Logger) *Dispatcher {
	if cfg.Consumers <= 0 {
		cfg.Consumers = ConsumersDefault
	}
	logger = logger.With("service", "dispatcher")
	d := &Dispatcher{ready: ready.New(1), send: cfg.Dispatch, cfg: cfg, store: st, conn: conn, clock: clk, logger: logger}
	if d.send == nil {
		d.send = dispatch.New(dispatch.Config{Heartbeat: cfg.Heartbeat, Shards: cfg.Shards}, st, rdb, k, clk, logger)
		d.ownSend = true
	}
	return d
}

// dueBatch bounds how many due commands one pass checks and hands on.
const dueBatch = 512

// Run consumes due commands until ctx ends.
func (d *Dispatcher) Run(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	if d.ownSend {
		g.Go(func() error { return d.send.Run(gctx) })
	}
	g.Go(func() error {
		return bus.ConsumeBatches(gctx, d.conn.JS, bus.ConsumerSpec{
			Name: events.ConsumerDispatcher, Stream: events.StreamWork,
			Subject: events.SubjectDue, Parallel: d.cfg.Consumers, Declared: d.ready.Done,
		}, dueBatch, d.logger, d.handleDue)
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
		if h := m.Headers(); h != nil {
			due.TraceParent = h.Get(events.HeaderTraceParent)
		}
		dues = append(dues, due)
	}
	return d.DispatchBatch(ctx, dues)
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
	readBack := d.send.InRollout(ctx)
	for _, due := range dues {
		// A type in rollout needs the row's key and version to route.
		if !due.Lean() || readBack(due.Type) {
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
		paused      = d.send.Pauses()
	)
	for _, due := range dues {
		task, lean := tasks[due.TaskID], due.Lean() && !readBack(due.Type)
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
		if paused.Held(ctx, task.Type) {
			continue
		}
		lane := due.Priority
		if lane.Rank() < 0 {
			lane = task.Priority
		}
		h := &handOff{lane: lane, key: task.BizKey, pinned: task.ExecVersion, task: events.TaskDispatched{
			TaskID: task.ID, Type: task.Type, Attempt: task.Attempt,
			TimeoutMs: task.TimeoutMs, NextRunTimeMs: task.NextRunTimeMs, Load: lean,
		}, trace: due.TraceParent}
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
	now0, later, err := d.endBackoffs(ctx, retrying, now0, later)
	if err != nil {
		return err
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

// endBackoffs writes the RETRYING -> READY transfers of the tasks whose
// backoff elapsed, in one transaction, and keeps of each list the
// hand-offs whose transfer held (or that needed none).
func (d *Dispatcher) endBackoffs(ctx context.Context, retrying [][]store.TransferParams, now0, later []*handOff) ([]*handOff, []*handOff, error) {
	if len(retrying) == 0 {
		return now0, later, nil
	}
	out, err := d.store.TransferBatch(ctx, retrying)
	if err != nil {
		return nil, nil, err
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
	return keep(now0), keep(later), nil
}

// handOff is one task passing the dispatcher's checks.
type handOff struct {
	task events.TaskDispatched
	lane contracts.Priority
	// retrying is 1 + the index of its RETRYING -> READY chain, or 0.
	retrying int
	early    time.Duration
	// key and pinned route a type in rollout (dispatch.Task).
	key, pinned string
	trace       string
}

// handOff publishes the tasks to their executors' subjects, awaiting every
// acknowledgement, then marks them dispatched in Redis.
func (d *Dispatcher) handOff(ctx context.Context, hs []*handOff) error {
	if len(hs) == 0 {
		return nil
	}
	tasks := make([]dispatch.Task, len(hs))
	for i, h := range hs {
		tasks[i] = dispatch.Task{Lane: h.lane, Dispatch: h.task, Key: h.key, Pinned: h.pinned, TraceParent: h.trace, By: "dispatcher"}
	}
	ready, waiting := d.send.Place(ctx, tasks)
	if err := d.send.Send(ctx, d.conn, ready); err != nil {
		return err
	}
	return d.wait(ctx, waiting)
}

// versionWait is how long a task whose version has no live executor
// waits before the dispatcher looks again (within the rollout's grace).
const versionWait = 500 * time.Millisecond

// wait hands tasks whose version has no live executor (yet) back to the
// due subject after versionWait: the next look routes them to a node of
// their version that came back, or past the grace to the other version.
// They stay READY and are not marked dispatched meanwhile.
func (d *Dispatcher) wait(ctx context.Context, tasks []dispatch.Task) error {
	if len(tasks) == 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(versionWait):
	}
	msgs := make([]bus.Msg, 0, len(tasks))
	for _, t := range tasks {
		data, err := events.Encode(events.TaskDue{TaskID: t.Dispatch.TaskID, Priority: t.Lane, NextRunTimeMs: t.Dispatch.NextRunTimeMs})
		if err != nil {
			return err
		}
		msgs = append(msgs, bus.Msg{Subject: events.SubjectDue, EventType: events.TypeTaskDue,
			CorrelationID: strconv.FormatInt(t.Dispatch.TaskID, 10), Data: data})
	}
	if err := d.conn.Publish(ctx, msgs); err != nil {
		return fmt.Errorf("hand back %d task(s) waiting for their version: %w", len(msgs), err)
	}
	return nil
}
