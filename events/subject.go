package events

import (
	"strings"

	"github.com/axsched/ax/contracts"
)

// Stream names.
const (
	// StreamEvents stores every task state transfer.
	StreamEvents = "AX_EVENTS"
	// StreamWork carries due and dispatched commands; a message is removed
	// once a consumer acknowledges it.
	StreamWork = "AX_WORK"
)

// Subject roots and fixed subjects.
const (
	// EventsSubjects is the filter that StreamEvents stores.
	EventsSubjects = "ax.events.>"
	// WorkSubjects is the filter that StreamWork stores.
	WorkSubjects = "ax.work.>"
	// SubjectDue carries TaskDue commands from the timer to the dispatcher.
	SubjectDue = "ax.work.due"

	// SubjectTypeChanged carries TaskTypeChanged events (pause, resume,
	// limits) to every service that caches type settings.
	SubjectTypeChanged = "ax.events.type.changed"

	// SubjectTaskRejected carries the trace of a write refused by attempt
	// fencing (a TaskTransferred whose From and To are the current state).
	SubjectTaskRejected = "ax.events.task.rejected"

	// SubjectBenchDone carries BenchDone reports of the built-in ax.bench
	// task type to the `ax bench` harness. It is core NATS, outside both
	// streams: a benchmark report is fire-and-forget and never stored.
	SubjectBenchDone = "ax.bench.done"

	taskEventPrefix = "ax.events.task."
	execPrefix      = "ax.work.exec."
)

// Durable consumer names.
const (
	// ConsumerTimer indexes READY events into the timer's sorted sets.
	ConsumerTimer = "timer"
	// ConsumerDispatcher takes due commands.
	ConsumerDispatcher = "dispatcher"
)

// TaskEventSubject is the subject of the transfer into state to.
func TaskEventSubject(to contracts.Status) string {
	return taskEventPrefix + strings.ToLower(string(to))
}

// ExecSubject is the subject of one priority lane of a task type; the
// executors of the type drain the lanes high first.
func ExecSubject(taskType string, lane contracts.Priority) string {
	return execPrefix + string(lane) + "." + taskType
}

// ExecDoorbell matches every lane of a task type; executors listen on it
// (core NATS, no JetStream) to learn that work arrived while they were idle.
func ExecDoorbell(taskType string) string {
	return execPrefix + "*." + taskType
}

// ExecConsumer is the durable consumer of one lane of taskType, shared by
// every executor serving the type. Type names contain no '_'
// (contracts.ValidateTypeName), so the mapping is one to one.
func ExecConsumer(taskType string, lane contracts.Priority) string {
	return "exec_" + strings.ReplaceAll(taskType, ".", "_") + "_" + string(lane)
}

// ConsumerTimerRetrying indexes RETRYING tasks at their backoff's end.
const ConsumerTimerRetrying = "timer_retrying"

// ConsumerTimerTypes follows task type changes for the timer.
const ConsumerTimerTypes = "timer_types"
