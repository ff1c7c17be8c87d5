package dispatch

import (
	"context"
	"log/slog"
	"time"

	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/store"
)

// queueGroups bounds the groups of dispatches waiting to be sent. A group
// that finds the queue full (NATS has not answered for a while) is not
// queued: its tasks are left to the reconciler, so the writer that
// committed them keeps committing while NATS is away.
const queueGroups = 256

// sendTimeout bounds one send, and the last sends at shutdown.
const sendTimeout = 10 * time.Second

// Queue sends, off the committing goroutine, the dispatches of tasks a
// writer made READY and due at once and marked dispatched by itself
// (events.RouteDispatched): the submitter's group commits, the executor's
// outcome transactions (children released, compensations started). Each
// send takes every group queued by then. A group that is not sent (the
// queue full, NATS refusing it, the process killed first) leaves its tasks
// READY and unmarked, and the timer's reconciler re-drives them from MySQL
// after its grace, as for any lost dispatch; a dispatch repeated anyway is
// absorbed by the executor's claim, fenced on the attempt and due time.
type Queue struct {
	send   *Sender
	conn   *bus.Conn
	logger *slog.Logger
	groups chan []Task
	// drop, set only by tests, drops a group instead of sending it, as if
	// the process died between the commit and the send.
	drop func([]Task) bool
}

// NewQueue builds a queue sending with send's rule on conn. Run sends.
func NewQueue(send *Sender, conn *bus.Conn, logger *slog.Logger) *Queue {
	return &Queue{send: send, conn: conn, logger: logger, groups: make(chan []Task, queueGroups)}
}

// DropWith makes the queue drop every group for which drop says so,
// instead of sending it (tests: the window of a process killed between a
// commit and its dispatch). Call it before Run.
func (q *Queue) DropWith(drop func([]Task) bool) { q.drop = drop }

// Add queues tasks to be sent, without waiting; committedNs, the end of
// their commit, is stamped on each as its commit and send time (the
// commit_to_send hop is 0: no one else's transaction is waited for).
func (q *Queue) Add(tasks []Task, committedNs int64, by string) {
	if len(tasks) == 0 {
		return
	}
	for i := range tasks {
		tasks[i].Dispatch.CommittedNs, tasks[i].Dispatch.SentNs = committedNs, committedNs
		tasks[i].By = by
	}
	select {
	case q.groups <- tasks:
	default:
		q.logger.Warn("direct dispatch queue full; the reconciler re-drives these tasks", "tasks", len(tasks))
	}
}

// AddReleased queues, under the dispatch rule (Sender.Ready: not the
// tasks of a paused type), the dispatches of tasks a writer made READY and
// due at once, committed at committedNs, each in its own trace.
func (q *Queue) AddReleased(ctx context.Context, released []store.Released, committedNs int64, by string) {
	q.Add(q.Released(ctx, released), committedNs, by)
}

// Released turns tasks a writer made READY and due at once into their
// dispatches under the dispatch rule (Sender.Ready: not the tasks of a
// paused type), each in its own trace.
func (q *Queue) Released(ctx context.Context, released []store.Released) []Task {
	if len(released) == 0 {
		return nil
	}
	refs := make([]events.TaskRef, len(released))
	traces := make(map[int64]string, len(released))
	for i, r := range released {
		refs[i] = r.Ref
		if r.TraceParent != "" {
			traces[r.Ref.TaskID] = r.TraceParent
		}
	}
	tasks := q.send.Ready(ctx, refs)
	for i := range tasks {
		tasks[i].TraceParent = traces[tasks[i].Dispatch.TaskID]
	}
	return tasks
}

// Here splits tasks (Released) into those the dispatch rule sends to
// node's own subjects, which node may start without sending them, and
// the rest, for Add.
func (q *Queue) Here(ctx context.Context, node string, tasks []Task) (here, rest []Task) {
	return q.send.Here(ctx, node, tasks)
}

// Refresh reads the membership registry of the queue's Sender now.
func (q *Queue) Refresh(ctx context.Context) error { return q.send.Refresh(ctx) }

// Close ends Run once the groups queued so far are sent. Nothing may be
// added after it.
func (q *Queue) Close() { close(q.groups) }

// Run sends queued groups until Close, each send taking every group
// queued by then. What cannot be sent is left to the reconciler.
func (q *Queue) Run() {
	for tasks := range q.groups {
	more:
		for {
			select {
			case next, ok := <-q.groups:
				if !ok {
					break more
				}
				tasks = append(tasks, next...)
			default:
				break more
			}
		}
		if q.drop != nil && q.drop(tasks) {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), sendTimeout)
		if err := q.send.Send(ctx, q.conn, tasks); err != nil {
			q.logger.Warn("direct dispatch failed; the reconciler re-drives these tasks", "tasks", len(tasks), "err", err)
		}
		cancel()
	}
}
