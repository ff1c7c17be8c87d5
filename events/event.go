package events

import (
	"fmt"
	"time"

	"github.com/segmentio/encoding/json"

	"github.com/axsched/ax/contracts"
)

// Event type names, versioned so a consumer can refuse what it cannot read.
const (
	TypeTaskTransferred = "task.transferred.v1"
	// TypeTaskTransfers is a TaskTransfers: several transfers of one
	// subject in one message.
	TypeTaskTransfers  = "task.transfers.v1"
	TypeTaskDue        = "task.due.v1"
	TypeTaskDispatched = "task.dispatched.v1"
	// TypeTaskDispatches is a TaskDispatches: several dispatches for one
	// executor subject in one message.
	TypeTaskDispatches  = "task.dispatches.v1"
	TypeTaskTypeChanged = "tasktype.changed.v1"
	TypeRolloutChanged  = "rollout.changed.v1"
)

// RolloutChanged records one move of a type's rollout (started, stepped,
// paused, promoted, rolled back), automatic or by an operator; the same
// move is a row of the type's rollout log.
type RolloutChanged struct {
	Type        string    `json:"type"`
	Version     string    `json:"version"`
	Action      string    `json:"action"`
	FromPercent int       `json:"from_percent"`
	ToPercent   int       `json:"to_percent"`
	Reason      string    `json:"reason"`
	Actor       string    `json:"actor"`
	At          time.Time `json:"at"`
}

// TaskTypeChanged says an operator changed a task type's settings. Services
// that cache type settings refresh them; the timer re-indexes a resumed
// type's waiting tasks at once.
type TaskTypeChanged struct {
	Name        string    `json:"name"`
	Paused      bool      `json:"paused"`
	Concurrency int       `json:"concurrency"`
	Actor       string    `json:"actor"`
	At          time.Time `json:"at"`
}

// TaskTransferred records that a task moved between two states. It is the
// event twin of one task_history row and shares its event ID.
type TaskTransferred struct {
	EventID string           `json:"event_id"`
	TaskID  int64            `json:"task_id,string"`
	Type    string           `json:"type"`
	From    contracts.Status `json:"from"`
	To      contracts.Status `json:"to"`
	Attempt int              `json:"attempt"`
	// Priority is the lane the task is served in.
	Priority contracts.Priority `json:"priority"`
	// NextRunTimeMs is when the task is due, in Unix milliseconds of the
	// scheduler clock; meaningful for READY.
	NextRunTimeMs int64     `json:"next_run_time_ms"`
	Reason        string    `json:"reason"`
	Actor         string    `json:"actor"`
	At            time.Time `json:"at"`
	// Route says, for a READY event, which service takes the task on from
	// here; empty (the timer) for every other state.
	Route Route `json:"route,omitempty"`
}

// TaskTransfers carries several TaskTransferred events of one subject in
// one message, oldest first, each as it would travel alone (with its own
// event_id). The relay publishes the transfers of a pass this way, up to
// its --relay-events-per-message (64 by default): one stored message in
// AX_EVENTS instead of one per transfer was most of what JetStream spent
// on a task. A transfer with a trace context still travels alone, so its
// traceparent header is its own. Read either kind with ReadTransfers.
type TaskTransfers struct {
	Transfers []TaskTransferred `json:"transfers"`
}

// ReadTransfers appends to out the transfers of one message of AX_EVENTS:
// one TaskTransferred, or several when eventType (the message's
// HeaderEventType) is TypeTaskTransfers. T is TaskTransferred, or TaskRef
// for a consumer that needs only where the task goes.
func ReadTransfers[T TaskTransferred | TaskRef](eventType string, data []byte, out []T) ([]T, error) {
	if eventType != TypeTaskTransfers {
		var one T
		if err := Decode(data, &one); err != nil {
			return out, err
		}
		return append(out, one), nil
	}
	var many struct {
		Transfers []T `json:"transfers"`
	}
	if err := Decode(data, &many); err != nil {
		return out, err
	}
	return append(out, many.Transfers...), nil
}

// TaskRef is the part of a TaskTransferred that the scheduling hot path
// (the timer's and dispatcher's READY consumers) reads. Decoding an event
// into it passes over the reason, actor and timestamp instead of copying
// and parsing them.
type TaskRef struct {
	TaskID        int64              `json:"task_id,string"`
	Type          string             `json:"type"`
	To            contracts.Status   `json:"to"`
	Attempt       int                `json:"attempt"`
	Priority      contracts.Priority `json:"priority"`
	NextRunTimeMs int64              `json:"next_run_time_ms"`
	Route         Route              `json:"route,omitempty"`
}

// Route is who takes a READY task on. Every READY transfer is handled by
// exactly one of the timer (from the event), the relay (with the event)
// and its writer, decided by the writer, so none has to guess from clocks.
type Route string

const (
	// RouteTimer (empty): the timer indexes the task by its due time.
	RouteTimer Route = ""
	// RouteDispatch: the task was due when it became READY (submitted
	// without delay in a batch or a workflow, released, or handed back by
	// a failed or departing executor), so
	// the relay that publishes the event dispatches the task with it, two
	// hops and one stored command fewer than through the timer and the
	// dispatcher.
	RouteDispatch Route = "dispatch"
	// RouteDispatched: the writer dispatched the task itself (the
	// submitter right after committing a single submission, the timer or
	// the dispatcher ending a backoff); nobody acts on the event.
	RouteDispatched Route = "dispatched"
)

// TaskDue tells the dispatcher that a task's due time has come.
//
// Type, Attempt and Status are the task as the timer indexed it (Status
// READY or RETRYING). A command that has them is lean: the dispatcher hands
// the task on without reading its row, fencing the claim (or the RETRYING
// -> READY transfer) on that attempt and on the due time NextRunTimeMs, so
// a task re-scheduled since it was indexed is neither started early nor
// twice. A command without them (a timer that predates them, or an index
// entry written before) is read back first.
type TaskDue struct {
	TaskID        int64              `json:"task_id,string"`
	Priority      contracts.Priority `json:"priority"`
	NextRunTimeMs int64              `json:"next_run_time_ms"`
	Type          string             `json:"type,omitempty"`
	Attempt       int                `json:"attempt,omitempty"`
	Status        contracts.Status   `json:"status,omitempty"`
	// TraceParent is the task's trace context, from the message's
	// traceparent header (HeaderTraceParent), never from its payload.
	TraceParent string `json:"-"`
}

// Lean reports whether the command says all the dispatcher needs to hand
// the task on without reading it.
func (d TaskDue) Lean() bool {
	return d.Type != "" && (d.Status == contracts.StatusReady || d.Status == contracts.StatusRetrying)
}

// TaskDispatched hands a due, READY task to the executors of its type.
// Attempt is the attempt the task had when dispatched; the claim succeeds
// only if it is still current. It says where the task goes, not what it
// runs with: the executor takes the payload and retry counts from the task
// row its claim locks anyway, so a payload is stored in JetStream once, in
// no command.
//
// Load marks a lean dispatch, which does not say the timeout either: the
// dispatcher sends it for tasks it hands on straight from their READY
// event, without reading the row, and the executor's lease starts at its
// shortest length until the claim tells the timeout. Executors that predate
// taking the payload from the claim would run a task with no payload:
// upgrade executors before dispatchers.
//
// The claim also requires the task's due time to be no later than
// NextRunTimeMs (when set): a dispatch built from an event or an index
// entry, not from the row, cannot start a task re-scheduled since.
type TaskDispatched struct {
	TaskID        int64  `json:"task_id,string"`
	Type          string `json:"type"`
	Attempt       int    `json:"attempt"`
	TimeoutMs     int64  `json:"timeout_ms"`
	NextRunTimeMs int64  `json:"next_run_time_ms"`
	Load          bool   `json:"load,omitempty"`
	// CommittedNs and SentNs time the first hops of a task due at once
	// (Unix nanoseconds; zero when unknown): when its READY transfer was
	// written (the history row's time, or the submitter's commit) and
	// when its sender took it up (the relay's read of the row, or the
	// submitter's commit). The executor adds when JetStream stored the
	// dispatch, when it fetched, claimed and started it
	// (metrics.TaskHopSeconds).
	CommittedNs int64 `json:"committed_ns,omitempty"`
	SentNs      int64 `json:"sent_ns,omitempty"`
	// FallbackFrom names the version a type in rollout meant the task for
	// when none of its executors was live past the grace: the claim
	// records the fallback in the task's history.
	FallbackFrom string `json:"fallback_from,omitempty"`
}

// TaskDispatches hands several due, READY tasks to the executors of one
// subject (one type, lane and node) in one message: each is a
// TaskDispatched as if sent alone, fenced by its own claim. One stored
// message, delivery and acknowledgement per batch instead of per task is
// most of what a dispatch costs JetStream. The executor acknowledges the
// message once every task in it has its verdict, and hands the whole
// message back when any of them must come back: a task of the batch that
// already ran loses its repeated claim. Executors that predate it cannot
// read it: upgrade executors before the services that dispatch.
type TaskDispatches struct {
	Tasks []TaskDispatched `json:"tasks"`
}

// Decode unmarshals data into v with a useful error.
//
// Events and commands are encoded and decoded with
// github.com/segmentio/encoding/json, a drop-in for encoding/json that
// produces the same bytes and accepts the same input, 2.5x faster to encode
// and 5x faster to decode these messages with a third of the allocations
// (BenchmarkEventEncodeDecode): every task passes through several of them.
// The HTTP API keeps encoding/json, whose error messages it shows callers.
func Decode(data []byte, v any) error {
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("decode %T: %w", v, err)
	}
	return nil
}

// Encode marshals an event or command (see Decode).
func Encode(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return data, nil
}
