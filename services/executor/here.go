package executor

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/dispatch"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
)

// Released children run here. The outcome transaction that ends a parent
// releases its children; a child whose shard this node owns would be
// published to this node's own subject, stored by JetStream, delivered
// back here and acknowledged. Instead the writer puts its dispatch where
// this node's fetchers take work from first (the own lane's spill), with
// no message behind it (localMsg). From there it is any other dispatch:
// the same slots, lane order, lease, fused claim fenced on the released
// attempt and due time, outcome.
//
// Nothing is lost that a sent dispatch would keep. The child is READY in
// MySQL before it is put here; a node killed before its claim commits
// leaves it READY and unmarked in Redis, and the timer's reconciler
// re-drives it after its grace (5–10 s), as it does a child whose send
// was lost. A dispatch handed back (the node stopping, a claim that could
// not be made) goes to the dispatcher as a due command, the way a
// departing node's queued work does.

// hereRuns holds the intakes released children are put in, by type, while
// they fetch: nil before the intake starts and once it stops, so that
// nothing is put where no fetcher will take it.
type hereRuns struct {
	mu      sync.Mutex
	intakes map[string]*intake
}

// openHere lets the writers put released children in intakes.
func (e *Executor) openHere(intakes []*intake) {
	m := make(map[string]*intake, len(intakes))
	for _, in := range intakes {
		m[in.p.spec.Name] = in
	}
	e.here.mu.Lock()
	e.here.intakes = m
	e.here.mu.Unlock()
}

// closeHere stops putting released children in the intakes: from now on
// they are sent. What was put before is handed back with the rest of
// what the intakes hold.
func (e *Executor) closeHere() {
	e.here.mu.Lock()
	e.here.intakes = nil
	e.here.mu.Unlock()
}

// sendReleased hands on the tasks an outcome transaction committed at
// committedNs made READY and due at once: those this node would receive
// itself it takes up here, the others are sent.
func (e *Executor) sendReleased(ctx context.Context, released []store.Released, committedNs int64) {
	tasks := e.direct.Released(ctx, released)
	if len(tasks) == 0 {
		return
	}
	if !e.cfg.SendReleased {
		runs := make(map[int64]*store.RunFields, len(released))
		for _, r := range released {
			if r.Run != nil {
				runs[r.Ref.TaskID] = r.Run
			}
		}
		tasks = e.takeUpHere(ctx, tasks, runs, committedNs)
	}
	e.direct.Add(tasks, committedNs, "executor")
}

// takeUpHere puts the tasks the dispatch rule sends to this node's own
// subjects in the spill of their lane's own source and returns the rest.
// A type with a cluster-wide limit is claimed one task at a time by one
// fetcher from its lanes, so its tasks are sent. A task whose release
// read what its claim needs (runs) is claimed without reading its row
// again (readClaims); its outcome's transfer checks the fence under the
// row lock, as every fused claim's does.
func (e *Executor) takeUpHere(ctx context.Context, tasks []dispatch.Task, runs map[int64]*store.RunFields, committedNs int64) []dispatch.Task {
	here, rest := e.direct.Here(ctx, e.cfg.Node, tasks)
	if len(here) == 0 || (e.dropHere != nil && e.dropHere(here)) {
		return rest
	}
	now := time.Now()
	e.here.mu.Lock()
	defer e.here.mu.Unlock()
	for _, t := range here {
		in := e.here.intakes[t.Dispatch.Type]
		i := -1
		if in != nil && e.settings(ctx, in.p).Concurrency == 0 {
			i = in.ownSource(t.Lane)
		}
		if i < 0 {
			rest = append(rest, t)
			continue
		}
		d := t.Dispatch
		d.CommittedNs, d.SentNs = committedNs, committedNs
		run := runs[d.TaskID]
		if run != nil {
			// Its own timeout sizes its lease at once.
			d.Load, d.TimeoutMs = false, run.TimeoutMs
		}
		in.spills[i].put([]*head{{msg: &localMsg{e: e, task: t, subject: in.srcs[i].subject}, task: d, run: run,
			fetchedAt: now, lastKeep: now}})
		in.rungAt[i].Store(now.UnixNano())
		in.ring()
		metrics.ExecutorReleasedHere.WithLabelValues(d.Type).Inc()
	}
	return rest
}

// ownSource returns the index of the source of lane on this node's own
// subject, or -1.
func (in *intake) ownSource(lane contracts.Priority) int {
	for i, src := range in.srcs {
		if src.own && contracts.Priorities[src.lane] == lane {
			return i
		}
	}
	return -1
}

// errNotSent answers Metadata for a dispatch that has no message.
var errNotSent = errors.New("a released child taken up where it was released: no message")

// localMsg stands for the message of a dispatch that was never sent.
// Settling it (Ack, InProgress) is nothing to do; handing it back (Nak,
// NakWithDelay, Term) sends the task to the dispatcher as a due command.
type localMsg struct {
	e       *Executor
	task    dispatch.Task
	subject string
}

var _ jetstream.Msg = (*localMsg)(nil)

func (m *localMsg) Metadata() (*jetstream.MsgMetadata, error) { return nil, errNotSent }
func (m *localMsg) Data() []byte                              { return nil }
func (m *localMsg) Subject() string                           { return m.subject }
func (m *localMsg) Reply() string                             { return "" }
func (m *localMsg) Ack() error                                { return nil }
func (m *localMsg) DoubleAck(context.Context) error           { return nil }
func (m *localMsg) InProgress() error                         { return nil }
func (m *localMsg) Nak() error                                { return m.handBack() }
func (m *localMsg) Term() error                               { return m.handBack() }
func (m *localMsg) TermWithReason(string) error               { return m.handBack() }

// NakWithDelay hands the task back at once: the delay is for a message
// JetStream would deliver again at once; a due command's claim, if it
// meets the same obstacle, is delayed by its own message.
func (m *localMsg) NakWithDelay(time.Duration) error { return m.handBack() }

// Headers carries the child's trace context, as its message would.
func (m *localMsg) Headers() nats.Header {
	if m.task.TraceParent == "" {
		return nil
	}
	h := nats.Header{}
	h.Set(events.HeaderTraceParent, m.task.TraceParent)
	return h
}

// handBackWait bounds the publication of a due command for a released
// child handed back.
const handBackWait = 5 * time.Second

// handBack sends the task to the dispatcher, which routes it as it routes
// work moved off a departing node; if that fails the task, READY and not
// marked dispatched, is the reconciler's.
func (m *localMsg) handBack() error {
	d := m.task.Dispatch
	data, err := events.Encode(events.TaskDue{TaskID: d.TaskID, Priority: m.task.Lane, NextRunTimeMs: d.NextRunTimeMs,
		Type: d.Type, Attempt: d.Attempt, Status: contracts.StatusReady})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), handBackWait)
		defer cancel()
		err = bus.PublishBatch(ctx, m.e.conn.JS, []bus.Msg{{Subject: events.SubjectDue, EventType: events.TypeTaskDue,
			CorrelationID: strconv.FormatInt(d.TaskID, 10), Data: data, TraceParent: m.task.TraceParent}})
	}
	if err != nil {
		m.e.logger.Warn("hand back a released child; the reconciler re-drives it", "task_id", d.TaskID, "err", err)
	}
	return err
}
