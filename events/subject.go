package events

import (
	"hash/fnv"
	"strconv"
	"strings"
	"unicode"

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

	// SubjectRolloutChanged carries RolloutChanged events.
	SubjectRolloutChanged = "ax.events.rollout.changed"

	// SubjectTaskRejected carries the trace of a write refused by attempt
	// fencing (a TaskTransferred whose From and To are the current state).
	SubjectTaskRejected = "ax.events.task.rejected"

	// SubjectRelayWake tells the relay holding the history lease that
	// another process committed history rows (no payload). Core NATS,
	// outside both streams: a lost wake-up only waits for the next poll.
	SubjectRelayWake = "ax.relay.wake"

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
	// ObsoleteConsumerDispatcherReady took READY events routed for
	// dispatch at once (RouteDispatch) before the relay dispatched them
	// itself; ax removes it where an older version declared it.
	ObsoleteConsumerDispatcherReady = "dispatcher_ready"
)

// TaskEventSubject is the subject of the transfer into state to.
func TaskEventSubject(to contracts.Status) string {
	return taskEventPrefix + strings.ToLower(string(to))
}

// SubjectReadyNow carries the READY transfers that are not the timer's
// (Route other than RouteTimer: dispatched with their event, or by their
// writer): ax.events.task.ready holds only tasks waiting for a due time, so
// the timer's consumer is not handed — and does not acknowledge — one event
// per task due at once. Subscribe to ax.events.task.ready.> for these and
// to ax.events.task.> for every transfer.
const SubjectReadyNow = taskEventPrefix + "ready.now"

// SubjectRetryingNow carries the RETRYING transfers whose backoff had
// elapsed by their commit, so the same transaction moved the task on to
// READY (Route other than RouteTimer): ax.events.task.retrying holds only
// the backoffs the timer waits out. Subscribe to
// ax.events.task.retrying.> for these.
const SubjectRetryingNow = taskEventPrefix + "retrying.now"

// TransferSubject is the subject of a TaskTransferred into state to taken
// on by route.
func TransferSubject(to contracts.Status, route Route) string {
	switch {
	case to == contracts.StatusReady && route != RouteTimer:
		return SubjectReadyNow
	case to == contracts.StatusRetrying && route != RouteTimer:
		return SubjectRetryingNow
	}
	return TaskEventSubject(to)
}

// SharedToken is the last token of a type's shared subjects, where the
// dispatcher sends work while no live executor serves the type (or before
// it knows of one); every executor of the type pulls them too.
const SharedToken = "_"

// ExecSubject is the subject of one priority lane of a task type for one
// executor node (its NodeToken) or SharedToken: the dispatcher sends a
// task to the owner of its shard, and every executor drains its own lanes
// and the shared ones, high first.
func ExecSubject(taskType string, lane contracts.Priority, token string) string {
	return execPrefix + string(lane) + "." + taskType + "." + token
}

// ExecDoorbell matches every lane of a task type for one token; executors
// listen on it (core NATS, no JetStream) to learn that work arrived while
// they were idle.
func ExecDoorbell(taskType, token string) string {
	return execPrefix + "*." + taskType + "." + token
}

// ExecAll matches every executor subject.
const ExecAll = execPrefix + ">"

// ParseExecSubject splits an executor subject into its lane, task type and
// token.
func ParseExecSubject(subject string) (lane contracts.Priority, taskType, token string, ok bool) {
	rest, found := strings.CutPrefix(subject, execPrefix)
	if !found {
		return "", "", "", false
	}
	l, rest, found := strings.Cut(rest, ".")
	i := strings.LastIndexByte(rest, '.')
	if !found || i <= 0 || i == len(rest)-1 {
		return "", "", "", false
	}
	lane = contracts.Priority(l)
	if lane.Rank() < 0 {
		return "", "", "", false
	}
	return lane, rest[:i], rest[i+1:], true
}

// ExecConsumer is the durable consumer of one lane of taskType for one
// token. Type names contain no '_' (contracts.ValidateTypeName) and tokens
// no '.', so the mapping is one to one.
func ExecConsumer(taskType string, lane contracts.Priority, token string) string {
	return "exec_" + strings.ReplaceAll(taskType, ".", "_") + "_" + string(lane) + "_" + token
}

// NodeToken turns a node name into a subject token and consumer-name part:
// letters, digits and '-' kept, anything else '-', at most 40 characters,
// and a short hash of the full name so distinct names never collide.
func NodeToken(node string) string {
	var b strings.Builder
	for _, r := range node {
		if b.Len() >= 40 {
			break
		}
		if r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	h := fnv.New32a()
	h.Write([]byte(node))
	return b.String() + "-" + strconv.FormatUint(uint64(h.Sum32()), 36)
}

// ConsumerTimerRetrying indexes RETRYING tasks at their backoff's end.
const ConsumerTimerRetrying = "timer_retrying"

// ConsumerTimerTypes follows task type changes for the timer.
const ConsumerTimerTypes = "timer_types"
