package contracts

import (
	"encoding/json"
	"fmt"
	"time"
)

// Priority is a dispatch lane. Lanes are served high first; a small fixed
// number keeps ordering understandable.
type Priority string

// The three lanes, highest first.
const (
	PriorityHigh   Priority = "high"
	PriorityNormal Priority = "normal"
	PriorityLow    Priority = "low"
)

// Priorities lists the lanes in the order they are served.
var Priorities = []Priority{PriorityHigh, PriorityNormal, PriorityLow}

// Rank is the lane's position in Priorities (0 is served first); it is what
// MySQL stores so that ORDER BY priority means "serve order".
func (p Priority) Rank() int {
	for i, q := range Priorities {
		if p == q {
			return i
		}
	}
	return -1
}

// PriorityFromRank is the inverse of Rank.
func PriorityFromRank(r int) Priority {
	if r < 0 || r >= len(Priorities) {
		return PriorityNormal
	}
	return Priorities[r]
}

// ParsePriority validates a lane name; the empty string means "the type's
// default" and is returned unchanged.
func ParsePriority(v string) (Priority, error) {
	if v == "" {
		return "", nil
	}
	p := Priority(v)
	if p.Rank() < 0 {
		return "", fmt.Errorf("unknown priority %q: want one of high, normal, low", v)
	}
	return p, nil
}

// validTypeName reports whether name is lowercase letters and digits in
// runs separated by single '-' or '.' (the pattern
// ^[a-z0-9]+(-[a-z0-9]+)*(\.[a-z0-9]+(-[a-z0-9]+)*)*$): such names are
// usable as NATS subject tokens, and with no '_' a dot can be mapped to '_'
// in consumer names without two types colliding. Checked by hand rather
// than by regexp: every submission checks its type name.
func validTypeName(name string) bool {
	sep := true // the name must not start with a separator
	for i := 0; i < len(name); i++ {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
			sep = false
		case (c == '-' || c == '.') && !sep:
			sep = true
		default:
			return false
		}
	}
	return !sep // nor end with one (nor be empty)
}

// MaxTypeNameLen bounds a task type name.
const MaxTypeNameLen = 128

// ValidateTypeName explains why a task type name is unusable, or returns nil.
func ValidateTypeName(name string) error { return validateName("task type", name) }

// validateName applies the rules of type names to a name of kind.
func validateName(kind, name string) error {
	if name == "" {
		return fmt.Errorf("%s is required", kind)
	}
	if len(name) > MaxTypeNameLen || !validTypeName(name) {
		return fmt.Errorf("%s %q is invalid: use lowercase letters, digits and '-', in segments separated by '.', at most %d characters", kind, name, MaxTypeNameLen)
	}
	return nil
}

// MaxBizKeyLen bounds a business key in bytes.
const MaxBizKeyLen = 255

// SubmitRequest is the body of POST /v1/tasks.
type SubmitRequest struct {
	// Type names a registered task type, e.g. "ax.noop".
	Type string `json:"type"`
	// Payload is handed to the handler untouched; it must be JSON.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Priority is high, normal or low; empty uses the type's default.
	Priority string `json:"priority,omitempty"`
	// Delay is a Go duration ("10m", "1500ms") after which the task is due.
	Delay string `json:"delay,omitempty"`
	// RunAt is an RFC 3339 time at which the task is due. Exclusive with Delay.
	RunAt string `json:"run_at,omitempty"`
	// BizKey deduplicates submissions per type: a second task with the same
	// key returns the first. Compared byte for byte.
	BizKey string `json:"biz_key,omitempty"`
	// MaxRetries overrides the type's default number of retries.
	MaxRetries *int `json:"max_retries,omitempty"`
	// Timeout overrides the type's default run timeout (Go duration).
	Timeout string `json:"timeout,omitempty"`
	// Parents are IDs of existing tasks this one waits for, in SUSPEND;
	// it runs when every parent ended in a state When accepts, and is
	// cancelled when one cannot. Not accepted in a batch.
	Parents []string `json:"parents,omitempty"`
	// When is the condition on every parent: success (default), failure
	// or always. Only with Parents.
	When string `json:"when,omitempty"`
	// TraceParent is a W3C trace context
	// ("00-<32 hex trace ID>-<16 hex span ID>-<2 hex flags>") the task
	// joins; it wins over the request's traceparent header. Without either
	// the task starts a trace of its own (when ax exports traces).
	TraceParent string `json:"traceparent,omitempty"`
}

// Task is the API view of a task.
type Task struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	Status      Status          `json:"status"`
	Priority    Priority        `json:"priority"`
	BizKey      string          `json:"biz_key,omitempty"`
	Payload     json.RawMessage `json:"payload,omitempty"`
	Attempt     int             `json:"attempt"`
	RetryCount  int             `json:"retry_count"`
	MaxRetries  int             `json:"max_retries"`
	Timeout     string          `json:"timeout"`
	NextRunTime time.Time       `json:"next_run_time"`
	Executor    string          `json:"executor,omitempty"`
	// Version is the version of the executor that last claimed the task
	// (docs/rollout.md): kept through retries, recoveries and re-runs.
	Version   string `json:"version,omitempty"`
	LastError string `json:"last_error,omitempty"`
	// Result is what the handler returned on success (JSON, at most
	// MaxResultBytes); absent when it returned none.
	Result json.RawMessage `json:"result,omitempty"`
	// Progress is what the handler last reported of a long run.
	Progress     *TaskProgress `json:"progress,omitempty"`
	CreatedAt    time.Time     `json:"created_at"`
	UpdatedAt    time.Time     `json:"updated_at"`
	Deduplicated bool          `json:"deduplicated,omitempty"`
	// Origin names the schedule and fire time of a task a schedule fired.
	Origin *TaskOrigin `json:"origin,omitempty"`
	// WorkflowID names the workflow the task is a step or a compensation
	// of (GET /v1/workflows/{id}); absent for a task outside a workflow.
	WorkflowID string `json:"workflow_id,omitempty"`
	// TraceID is the trace the task's spans join (32 hex digits); absent
	// for a task without a trace context.
	TraceID string `json:"trace_id,omitempty"`
}

// MaxResultBytes bounds a task's stored result: a result is for a small
// answer (an ID, a count, a URL), not for data, which belongs in the
// handler's own storage.
const MaxResultBytes = 64 << 10

// MaxProgressMessageBytes bounds a progress message.
const MaxProgressMessageBytes = 255

// TaskProgress is how far a long run has got, as its handler reported it.
type TaskProgress struct {
	// Percent is 0 to 100.
	Percent int    `json:"percent"`
	Message string `json:"message,omitempty"`
	// At is when it was stored; reports are written at most once a second.
	At time.Time `json:"at"`
}

// HistoryEntry is one state transfer of a task.
type HistoryEntry struct {
	From    Status    `json:"from"`
	To      Status    `json:"to"`
	Attempt int       `json:"attempt"`
	Reason  string    `json:"reason"`
	Actor   string    `json:"actor"`
	EventID string    `json:"event_id"`
	At      time.Time `json:"at"`
}

// History is the body of GET /v1/tasks/{id}/history, oldest transfer first.
type History struct {
	TaskID  string         `json:"task_id"`
	History []HistoryEntry `json:"history"`
}

// TaskList is the body of GET /v1/tasks: one page of tasks, without their
// payloads and results (GET /v1/tasks/{id} has them).
type TaskList struct {
	Tasks []Task `json:"tasks"`
	// NextCursor, present when the page is full, is passed as cursor to
	// read the next page.
	NextCursor string `json:"next_cursor,omitempty"`
}

// Stats is the body of GET /v1/stats: how many tasks there are per type and
// state, and the backlog of each lane. Unfinished states and lanes were read
// from MySQL at At, finished states (SUCCESS, FAILED, TIMEOUT, CANCELLED),
// which take a scan of the whole table, at FinishedAt.
type Stats struct {
	At         time.Time   `json:"at"`
	FinishedAt time.Time   `json:"finished_at"`
	Types      []TypeStats `json:"types"`
	Lanes      []LaneStats `json:"lanes"`
	// Workflows counts workflows per state (RUNNING and COMPENSATING read
	// at At, the others at FinishedAt); states without one are left out.
	Workflows map[WorkflowStatus]int64 `json:"workflows"`
}

// TypeStats counts one type's tasks per state; states without tasks are
// left out.
type TypeStats struct {
	Type   string           `json:"type"`
	Counts map[Status]int64 `json:"counts"`
}

// LaneStats is one priority lane's backlog: waiting tasks (READY or
// RETRYING) already due, and the due time of the oldest.
type LaneStats struct {
	Priority  Priority   `json:"priority"`
	Backlog   int64      `json:"backlog"`
	OldestDue *time.Time `json:"oldest_due,omitempty"`
}
