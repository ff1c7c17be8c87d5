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

// DispatchWith makes the submitter dispatch the tasks due at once that
// its single submissions and its workflows (their steps without parents
// or delay) create, with send's rule, on conn, right after
// their commit (direct dispatch, as the relay and the timer do, under the
// same rule: package dispatch). Without it (or before Run and after it),
// the relay dispatches them from their READY events. Call it before Run.
//
// Why not leave them to the relay: the relay publishes history rows in ID
// order, so a task's dispatch waits for every transaction that took a
// lower history ID and is still open, a claim or an outcome of another
// task included, up to the gap grace. The submitter knows its own commit,
// so it needs nobody else's. Its tasks' READY rows say route
// "dispatched": the relay publishes their events and leaves them alone, so
// each is dispatched once; what the queue does not send, the reconciler
// re-drives (dispatch.Queue).
func (s *Submitter) DispatchWith(send *dispatch.Sender, conn *bus.Conn) {
	s.direct = dispatch.NewQueue(send, conn, s.logger)
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
	var released []store.Released
	for i, r := range res {
		if mine == nil || !mine[i] || r.Deduplicated || r.Task == nil {
			continue
		}
		t := r.Task
		released = append(released, dueNow(t.ID, t.Type, t.Attempt, t.Priority, t.NextRunTimeMs, t.TraceParent))
	}
	s.direct.AddReleased(ctx, released, committed.UnixNano(), "submitter")
}

// routeWorkflowDirect marks the steps due at once of a workflow (those
// without parents or delay) as dispatched by the submitter, as
// routeDirect does a group's tasks, and reports whether it dispatches.
func (s *Submitter) routeWorkflowDirect(nw *store.NewWorkflow) bool {
	if s.direct == nil {
		return false
	}
	for i := range nw.Steps {
		if t := &nw.Steps[i].Task; t.Route == events.RouteDispatch {
			t.Route = events.RouteDispatched
		}
	}
	return true
}

// dispatchWorkflows queues the dispatches of the steps routeWorkflowDirect
// marked in the workflows of a committed group that were created (a
// deduplicated one wrote nothing: its steps were dispatched when it was
// created). res follows nws.
func (s *Submitter) dispatchWorkflows(ctx context.Context, nws []*store.NewWorkflow, res []store.WorkflowResult, committed time.Time) {
	var released []store.Released
	for i, nw := range nws {
		if res[i].Deduplicated {
			continue
		}
		for _, st := range nw.Steps {
			if t := st.Task; t.Route == events.RouteDispatched {
				released = append(released, dueNow(t.ID, t.Type, 0, t.Priority, t.NextRunTimeMs, t.TraceParent))
			}
		}
	}
	s.direct.AddReleased(ctx, released, committed.UnixNano(), "submitter")
}

// dueNow is a task the submitter created READY and due at once, for its
// dispatch.
func dueNow(id int64, typ string, attempt int, prio contracts.Priority, nextMs int64, traceParent string) store.Released {
	return store.Released{TraceParent: traceParent, Ref: events.TaskRef{TaskID: id, Type: typ, To: contracts.StatusReady,
		Attempt: attempt, Priority: prio, NextRunTimeMs: nextMs, Route: events.RouteDispatch}}
}
