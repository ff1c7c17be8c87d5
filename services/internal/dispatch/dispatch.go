// Package dispatch is the dispatch rule, the one place that decides "this
// task goes to that executor now":
//
//   - not while its type is paused (a cached "running" is believed, a
//     cached "paused" is confirmed in MySQL);
//   - to the node that owns the task's shard on the type's consistent hash
//     ring of live executors (package route, refreshed from the membership
//     registry every second), on ax.work.exec.<lane>.<type>.<node token>,
//     or, while no live executor serves the type, on the type's shared
//     subject, which every executor of the type also drains;
//   - carrying the task's attempt and due time, never its payload, so only
//     the executor's claim fenced on that attempt and due time can start it;
//   - with the other tasks of the same send bound for its subject, in one
//     message of up to MaxBatch (events.TaskDispatches): the executor
//     claims each on its own and acknowledges the message once all have
//     their verdicts (bus.Dispatches);
//   - marked dispatched in Redis (one pipeline per batch, no MySQL row
//     touched), so the timer's reconciler leaves it alone while it queues.
//
// The rule is the dispatcher's: the dispatcher service applies it to every
// due command. Four other senders apply it directly, a shortcut called
// direct dispatch: the submitter, to the tasks due at once that single
// submissions create, right after their commit (events.RouteDispatched);
// the executor, to the children and compensations its outcome
// transactions release, right after their commit (the same); the relay, to the other tasks due the moment they became READY
// (events.RouteDispatch), whose dispatches it sends in the same batch as
// their READY events; and the timer, to the delayed tasks and ended
// backoffs its pop finds due. Each already holds a task it knows to be due
// (it committed it; its writer decided the route; the pop read the Redis
// clock), so passing it through the dispatcher would only add a hop, a
// delivery and an acknowledgement per task (and, from the timer, a stored
// TaskDue command). All call this package and keep no rule of their own; docs/architecture.md
// ("Who dispatches") gives the measured gain.
//
// A duplicate dispatch (a relay publishing again after a crash, a task the
// reconciler re-indexed, two views of the ring for a second) is absorbed by
// the executor's claim, which is fenced on the task's attempt and due time.
package dispatch

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/ring"
	"github.com/axsched/ax/services/internal/route"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/tracing"
)

// Config tunes a Sender.
type Config struct {
	// Heartbeat is the executors' membership heartbeat interval (three
	// missed mean dead), for routing.
	Heartbeat time.Duration
	// Shards is the shard count of the types' rings (0: 64).
	Shards int
	// TypeCacheClock is the clock the cache of type settings expires by
	// (nil: the local clock); tests advance a fake one instead of waiting
	// the cache's TTL out.
	TypeCacheClock clock.Clock
}

// Task is one task to hand on, on a lane.
type Task struct {
	Lane     contracts.Priority
	Dispatch events.TaskDispatched
	// Key (biz_key, or the ID) and Pinned (the version that last ran it)
	// come from the task row, which only the dispatcher reads: Place routes
	// a task of a type in rollout by them. Such a task that was not placed
	// is handed to the dispatcher (a TaskDue) instead of an executor.
	Key    string
	Pinned string
	placed string // the node token Place chose
	// opens marks the first task of each executor message Messages built,
	// so Sent counts the messages (metrics.DispatchMessages).
	opens bool
	// TraceParent is the trace context the task arrived with (tracing):
	// its dispatch span is a child of it, and the executor's run a child
	// of that.
	TraceParent string
	// By names who dispatches (submitter, relay, timer, dispatcher) on the
	// span.
	By string
}

// Sender routes, publishes and marks dispatches.
type Sender struct {
	router *route.Router
	types  *store.TypeCache
	store  *store.Store
	rdb    redis.UniversalClient
	keys   keys.Keys
	clock  clock.Clock
	logger *slog.Logger
}

// New builds a Sender; Run keeps its routing current.
func New(cfg Config, st *store.Store, rdb redis.UniversalClient, k keys.Keys, clk clock.Clock, logger *slog.Logger) *Sender {
	return &Sender{
		router: route.NewRouter(rdb, k.Nodes(), clk, cfg.Heartbeat, ring.Config{Shards: cfg.Shards}, logger),
		// A pause or resume reaches dispatch within a second.
		types: store.NewTypeCache(st, time.Second, cfg.TypeCacheClock),
		store: st, rdb: rdb, keys: k, clock: clk, logger: logger,
	}
}

// Run reads the membership registry at once and then every second (every
// tenth of a second while it lists no live node) until ctx ends. Until the
// registry names an owner, work goes to the shared subjects.
func (s *Sender) Run(ctx context.Context) error {
	return s.router.Run(ctx)
}

// Refresh reads the membership registry now: an executor that has just
// registered routes to itself at once rather than at the next refresh.
func (s *Sender) Refresh(ctx context.Context) error {
	return s.router.Refresh(ctx)
}

// Ready turns READY events due at once (events.RouteDispatch) into lean
// dispatches (events.TaskDispatched.Load): the event is the transfer, so
// the task is not read back, and the executor's claim, which locks the row
// anyway and succeeds only while the task is still READY at that attempt
// and due by then, reads its payload and settings. Other events, repeats
// of a task and tasks of a paused type are left out; a held task stays
// READY, and resuming its type re-indexes it.
func (s *Sender) Ready(ctx context.Context, refs []events.TaskRef) []Task {
	var (
		out    []Task
		seen   map[int64]bool
		paused = s.Pauses()
	)
	for _, ev := range refs {
		if ev.To != contracts.StatusReady || ev.Route != events.RouteDispatch {
			continue // the timer's, or dispatched by its writer
		}
		if seen[ev.TaskID] {
			metrics.DispatchSkipped.WithLabelValues("duplicate").Inc()
			continue
		}
		if seen == nil {
			seen = make(map[int64]bool, len(refs))
		}
		seen[ev.TaskID] = true
		if paused.Held(ctx, ev.Type) {
			continue
		}
		out = append(out, Task{Lane: ev.Priority, Dispatch: events.TaskDispatched{
			TaskID: ev.TaskID, Type: ev.Type, Attempt: ev.Attempt, NextRunTimeMs: ev.NextRunTimeMs, Load: true,
		}})
	}
	return out
}

// Messages appends the tasks' dispatches, on their owners' subjects, to
// msgs. A task of a type in rollout that Place did not route goes to the
// dispatcher as a due command: only it reads the key and pinned version
// the choice needs, so direct dispatch steps aside for such types. Tasks
// bound for one subject go together, up to MaxBatch a message
// (events.TaskDispatches), except a task with a trace context, which keeps
// a message of its own (its dispatch span's context rides in the header).
func (s *Sender) Messages(ctx context.Context, msgs []bus.Msg, tasks []Task) ([]bus.Msg, error) {
	table := s.router.Table()
	canaries := s.canaries()
	var (
		groups  map[string][]int // indexes into tasks
		subject []string         // in the order first seen
	)
	for i := range tasks {
		tasks[i].opens = false
	}
	for i := range tasks {
		task := &tasks[i].Dispatch
		if tasks[i].placed == "" && canaries.of(ctx, task.Type) != nil {
			data, err := events.Encode(events.TaskDue{TaskID: task.TaskID, Priority: tasks[i].Lane, NextRunTimeMs: task.NextRunTimeMs})
			if err != nil {
				return nil, fmt.Errorf("encode due command of task %d: %w", task.TaskID, err)
			}
			msgs = append(msgs, bus.Msg{Subject: events.SubjectDue, EventType: events.TypeTaskDue,
				CorrelationID: strconv.FormatInt(task.TaskID, 10), Data: data, TraceParent: tasks[i].TraceParent})
			continue
		}
		token := tasks[i].placed
		if token == "" {
			token = events.SharedToken
			if owner, ok := table.Owner(task.Type, task.TaskID); ok {
				token = events.NodeToken(owner)
			}
		}
		subj := events.ExecSubject(task.Type, tasks[i].Lane, token)
		if tp := dispatchSpan(tasks[i], token); tp != "" {
			var err error
			if msgs, err = appendDispatch(msgs, subj, *task, tp); err != nil {
				return nil, err
			}
			tasks[i].opens = true
			continue
		}
		if groups == nil {
			groups = make(map[string][]int)
		}
		if _, ok := groups[subj]; !ok {
			subject = append(subject, subj)
		}
		groups[subj] = append(groups[subj], i)
	}
	for _, subj := range subject {
		for batch := range slices.Chunk(groups[subj], MaxBatch) {
			var err error
			if len(batch) == 1 {
				msgs, err = appendDispatch(msgs, subj, tasks[batch[0]].Dispatch, "")
			} else {
				msgs, err = appendDispatches(msgs, subj, tasks, batch)
			}
			if err != nil {
				return nil, err
			}
			tasks[batch[0]].opens = true
		}
	}
	return msgs, nil
}

// MaxBatch bounds the tasks of one dispatch message: what an executor's
// feed holds at its smallest, so one message never waits for more room
// than the feed has.
const MaxBatch = 16

// Here splits tasks into those the dispatch rule sends to node's own
// subjects (node owns the task's shard on its type's ring, and the type is
// in no rollout, whose placement only the dispatcher reads) and the rest.
// An executor runs the children its outcomes release that are here
// without sending them: the message would only come back to it.
func (s *Sender) Here(ctx context.Context, node string, tasks []Task) (here, rest []Task) {
	table := s.router.Table()
	canaries := s.canaries()
	for _, t := range tasks {
		if canaries.of(ctx, t.Dispatch.Type) == nil {
			if owner, ok := table.Owner(t.Dispatch.Type, t.Dispatch.TaskID); ok && owner == node {
				here = append(here, t)
				continue
			}
		}
		rest = append(rest, t)
	}
	return here, rest
}

// appendDispatch appends the message of one task's dispatch.
func appendDispatch(msgs []bus.Msg, subject string, task events.TaskDispatched, traceParent string) ([]bus.Msg, error) {
	m, err := bus.DispatchMsg(subject, task, traceParent)
	if err != nil {
		return nil, err
	}
	return append(msgs, m), nil
}

// appendDispatches appends one message carrying the dispatches of
// tasks[batch], all bound for subject.
func appendDispatches(msgs []bus.Msg, subject string, tasks []Task, batch []int) ([]bus.Msg, error) {
	b := events.TaskDispatches{Tasks: make([]events.TaskDispatched, len(batch))}
	for k, i := range batch {
		b.Tasks[k] = tasks[i].Dispatch
	}
	data, err := events.Encode(b)
	if err != nil {
		return nil, fmt.Errorf("encode dispatches of %d tasks: %w", len(batch), err)
	}
	return append(msgs, bus.Msg{Subject: subject, EventType: events.TypeTaskDispatches, Data: data}), nil
}

// Sent counts published dispatches and marks their tasks dispatched in
// Redis. A failed mark only loses a hint: the reconciler may re-drive
// those tasks early, and the executors' fencing absorbs the duplicate.
func (s *Sender) Sent(ctx context.Context, tasks []Task) {
	if len(tasks) == 0 {
		return
	}
	now := float64(s.clock.Now().UnixMilli())
	marks := make([]redis.Z, len(tasks))
	for i := range tasks {
		if tasks[i].opens {
			metrics.DispatchMessages.Inc()
		}
		task := &tasks[i].Dispatch
		metrics.DispatchedOf.With(task.Type).Inc()
		if task.Load {
			metrics.DispatchedLeanOf.With(task.Type).Inc()
		}
		marks[i] = redis.Z{Score: now, Member: strconv.FormatInt(task.TaskID, 10)}
	}
	if err := s.rdb.ZAdd(ctx, s.keys.Dispatched(), marks...).Err(); err != nil {
		s.logger.Warn("mark dispatched failed", "tasks", len(marks), "err", err)
	}
}

// Send publishes the tasks to their executors' subjects, awaiting every
// acknowledgement, then marks them dispatched.
func (s *Sender) Send(ctx context.Context, conn *bus.Conn, tasks []Task) error {
	if len(tasks) == 0 {
		return nil
	}
	msgs, err := s.Messages(ctx, make([]bus.Msg, 0, len(tasks)), tasks)
	if err != nil {
		return err
	}
	if err := conn.Publish(ctx, msgs); err != nil {
		return fmt.Errorf("dispatch %d task(s): %w", len(tasks), err)
	}
	s.Sent(ctx, tasks)
	return nil
}

// Pauses answers, for one batch, whether a type is paused, reading each
// type once.
type Pauses struct {
	s     *Sender
	types map[string]bool
}

// Pauses starts a batch's pause answers.
func (s *Sender) Pauses() *Pauses { return &Pauses{s: s} }

// Held reports whether a task of taskType is held back by a pause, and
// counts it: it stays READY and undispatched, and resuming the type
// re-indexes it.
func (p *Pauses) Held(ctx context.Context, taskType string) bool {
	paused, known := p.types[taskType]
	if !known {
		paused = p.s.paused(ctx, taskType)
		if p.types == nil {
			p.types = map[string]bool{}
		}
		p.types[taskType] = paused
	}
	if paused {
		metrics.DispatchSkipped.WithLabelValues("paused").Inc()
	}
	return paused
}

// paused reports whether a type is paused: "running" is believed from a
// cache at most a second old, "paused" is confirmed in MySQL. When the type
// cannot be read it is treated as not paused (the executor's claim still
// re-checks the task).
func (s *Sender) paused(ctx context.Context, taskType string) bool {
	t, err := s.types.Get(ctx, taskType)
	if err != nil {
		s.logger.Warn("cannot read task type; dispatching", "type", taskType, "err", err)
		return false
	}
	if !t.Paused {
		return false
	}
	// A cached "paused" may be up to a second stale, and a resume
	// re-indexes the type's tasks at once: trusting the cache would drop
	// them again and leave them to the reconciler. Pauses are rare, so the
	// truth is read.
	t, err = s.store.GetType(ctx, taskType)
	if err != nil {
		s.logger.Warn("cannot read task type; dispatching", "type", taskType, "err", err)
		return false
	}
	return t.Paused
}

// SpanDispatch names the span of handing a task to its executors.
const SpanDispatch = "ax.dispatch"

// dispatchSpan records the dispatch of t to the executor token in t's
// trace and returns the context its message carries.
func dispatchSpan(t Task, token string) string {
	if t.TraceParent == "" || !tracing.Enabled() {
		return t.TraceParent
	}
	attrs := append(tracing.TaskAttrs(t.Dispatch.TaskID, t.Dispatch.Type),
		attribute.Int("ax.attempt", t.Dispatch.Attempt), attribute.String("ax.lane", string(t.Lane)),
		attribute.String("ax.dispatch.by", t.By), attribute.String("ax.dispatch.to", token))
	return tracing.Child(t.TraceParent, SpanDispatch, trace.SpanKindProducer, attrs...)
}
