package submitter

import (
	"context"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/dispatch"
	"github.com/axsched/ax/services/internal/store"
)

// directQueue bounds the groups of dispatches waiting to be sent. A group
// that finds it full (NATS has not answered for a while) is not queued:
// its tasks are left to the reconciler, so submissions keep committing
// while NATS is away, as they did when only the relay dispatched.
const directQueue = 256

// directSendTimeout bounds one send, and the last sends at shutdown.
const directSendTimeout = 10 * time.Second

// direct sends, right after their group commit, the dispatches of the
// tasks due at once that single submissions created (direct dispatch, as
// the relay and the timer do, under the same rule: package dispatch).
//
// Why not leave them to the relay: the relay publishes history rows in ID
// order, so a task's dispatch waits for every transaction that took a
// lower history ID and is still open, a claim or an outcome of another
// task included, up to the gap grace. The submitter knows its own commit,
// so it needs nobody else's. Its tasks' READY rows say route
// "dispatched": the relay publishes their events and leaves them alone, so
// each is dispatched once. A dispatch that does not go out (the process
// killed between commit and send, NATS refusing it) leaves its task READY
// and unmarked, and the timer's reconciler re-drives it from MySQL after
// its grace, as for any lost dispatch; a dispatch repeated anyway (the
// reconciler racing a slow send) is absorbed by the claim, fenced on the
// attempt and due time.
type direct struct {
	send  *dispatch.Sender
	conn  *bus.Conn
	queue chan []dispatch.Task
	// fault, set only by tests, drops a group instead of sending it, as
	// if the process died between the commit and the send.
	fault func([]dispatch.Task) bool
}

// DispatchWith makes the submitter dispatch the tasks due at once that
// its single submissions create, with send's rule, on conn, right after
// their commit. Without it (or before Run and after it), the relay
// dispatches them from their READY events. Call it before Run.
func (s *Submitter) DispatchWith(send *dispatch.Sender, conn *bus.Conn) {
	s.direct = &direct{send: send, conn: conn, queue: make(chan []dispatch.Task, directQueue)}
}

// routeDirect marks the tasks due at once of a group as dispatched by the
// submitter, and reports which it marked.
func (s *Submitter) routeDirect(nts []store.NewTask) []bool {
	if s.direct == nil {
		return nil
	}
	mine := make([]bool, len(nts))
	for i := range nts {
		if nts[i].Route == events.RouteDispatch {
			nts[i].Route, mine[i] = events.RouteDispatched, true
		}
	}
	return mine
}

// dispatchCommitted queues the dispatches of the tasks of a committed group
// that routeDirect marked and that were created (not deduplicated against
// an existing task, which was dispatched when it was created).
func (s *Submitter) dispatchCommitted(ctx context.Context, mine []bool, res []store.BatchResult, committed time.Time) {
	var (
		refs   []events.TaskRef
		traces map[int64]string
	)
	for i, r := range res {
		if mine == nil || !mine[i] || r.Deduplicated || r.Task == nil {
			continue
		}
		t := r.Task
		refs = append(refs, events.TaskRef{TaskID: t.ID, Type: t.Type, To: contracts.StatusReady, Attempt: t.Attempt,
			Priority: t.Priority, NextRunTimeMs: t.NextRunTimeMs, Route: events.RouteDispatch})
		if t.TraceParent != "" {
			if traces == nil {
				traces = map[int64]string{}
			}
			traces[t.ID] = t.TraceParent
		}
	}
	if len(refs) == 0 {
		return
	}
	tasks := s.direct.send.Ready(ctx, refs) // leaves out the tasks of paused types
	ns := committed.UnixNano()
	for i := range tasks {
		tasks[i].Dispatch.CommittedNs, tasks[i].Dispatch.SentNs = ns, ns
		tasks[i].TraceParent, tasks[i].By = traces[tasks[i].Dispatch.TaskID], "submitter"
	}
	if len(tasks) == 0 {
		return
	}
	select {
	case s.direct.queue <- tasks:
	default:
		s.logger.Warn("direct dispatch queue full; the reconciler re-drives these tasks", "tasks", len(tasks))
	}
}

// runDirect sends queued dispatches until the queue closes, each send
// taking every group queued by then. What cannot be sent is left to the
// reconciler.
func (s *Submitter) runDirect() {
	d := s.direct
	for tasks := range d.queue {
	more:
		for {
			select {
			case next, ok := <-d.queue:
				if !ok {
					break more
				}
				tasks = append(tasks, next...)
			default:
				break more
			}
		}
		if d.fault != nil && d.fault(tasks) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), directSendTimeout)
		if err := d.send.Send(ctx, d.conn, tasks); err != nil {
			s.logger.Warn("direct dispatch failed; the reconciler re-drives these tasks", "tasks", len(tasks), "err", err)
		}
		cancel()
	}
}
