// Package events names everything that crosses NATS JetStream in ax: the
// streams, subjects and durable consumer names, the headers every message
// carries, and the versioned event and command payloads.
//
// Two streams exist:
//
//   - AX_EVENTS (limits retention) holds one TaskTransferred event per row of
//     task_history, published from that row by the relay; the transfers of
//     one relay pass on one subject travel together in one TaskTransfers
//     message (read either kind with ReadTransfers). The Nats-Msg-Id (the
//     event ID, or what names a TaskTransfers' transfers) makes JetStream
//     drop a message the relay publishes again. The
//     timer indexes READY events (ax.events.task.ready) by due time; those of
//     tasks due at once (Route other than the timer) go on
//     ax.events.task.ready.now instead, and their tasks are dispatched by
//     the relay together with the event or were by their writer.
//   - AX_WORK (work-queue retention) carries commands between services:
//     TaskDue (timer -> dispatcher) and TaskDispatched (dispatcher ->
//     executor, one subject per task type). Losing one of these delays a task
//     but never loses it: MySQL is the truth and reconcilers re-drive it.
package events
