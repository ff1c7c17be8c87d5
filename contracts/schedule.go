package contracts

import (
	"encoding/json"
	"time"
)

// TaskTemplate is the task a schedule submits at each fire time: the fields
// of a SubmitRequest that make sense for every fire. A fire is due at its
// fire time, so there is no delay or run_at; and each fire is its own
// task, so there is no biz_key.
type TaskTemplate struct {
	// Type names a registered task type.
	Type string `json:"type"`
	// Payload is handed to each fire's handler untouched; it must be JSON.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Priority is high, normal or low; empty uses the type's default at
	// fire time.
	Priority string `json:"priority,omitempty"`
	// MaxRetries overrides the type's default number of retries.
	MaxRetries *int `json:"max_retries,omitempty"`
	// Timeout overrides the type's default run timeout (Go duration).
	Timeout string `json:"timeout,omitempty"`
}

// SubmitRequest is the submission the template stands for; the submitter
// validates a template exactly as it would this task.
func (t TaskTemplate) SubmitRequest() SubmitRequest {
	return SubmitRequest{Type: t.Type, Payload: t.Payload, Priority: t.Priority, MaxRetries: t.MaxRetries, Timeout: t.Timeout}
}

// ScheduleRequest is the body of POST /v1/schedules (with Name) and of PUT
// /v1/schedules/{name} (which replaces the whole schedule).
type ScheduleRequest struct {
	// Name identifies the schedule: lowercase letters, digits, '-' and
	// '.', like a task type name.
	Name string `json:"name,omitempty"`
	// Cron is a cron expression: 5 fields (minute hour day-of-month month
	// day-of-week), or 6 with a leading seconds field, or a descriptor
	// such as "@hourly" or "@every 30s".
	Cron string `json:"cron"`
	// TimeZone is the IANA zone the expression is read in; empty is UTC.
	TimeZone string `json:"time_zone,omitempty"`
	// Task is what each fire submits.
	Task TaskTemplate `json:"task"`
	// Overlap is allow (default) or skip: skip passes over a fire time
	// while the previous fire's task is not final.
	Overlap string `json:"overlap,omitempty"`
	// CatchUp is what happens to fire times missed while no timer ran:
	// skip (default), last (fire the latest once) or all (fire each, up
	// to CatchUpLimit, the latest ones).
	CatchUp string `json:"catch_up,omitempty"`
	// CatchUpLimit caps catch_up all (default 100, at most 1000).
	CatchUpLimit int `json:"catch_up_limit,omitempty"`
	// Paused creates the schedule paused.
	Paused bool `json:"paused,omitempty"`
}

// Schedule is the API view of a schedule.
type Schedule struct {
	Name         string       `json:"name"`
	Cron         string       `json:"cron"`
	TimeZone     string       `json:"time_zone"`
	Task         TaskTemplate `json:"task"`
	Overlap      string       `json:"overlap"`
	CatchUp      string       `json:"catch_up"`
	CatchUpLimit int          `json:"catch_up_limit"`
	Paused       bool         `json:"paused"`
	// NextFireTime is when it fires next (while paused: when it would
	// have; resuming computes it afresh).
	NextFireTime time.Time `json:"next_fire_time"`
	// LastFireTime and LastTaskID describe the latest fire, if any.
	LastFireTime *time.Time `json:"last_fire_time,omitempty"`
	LastTaskID   string     `json:"last_task_id,omitempty"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    time.Time  `json:"updated_at"`
}

// ScheduleList is the body of GET /v1/schedules, in name order.
type ScheduleList struct {
	Schedules []Schedule `json:"schedules"`
	// Next is the name to pass as ?after= for the next page; empty on the
	// last page.
	Next string `json:"next,omitempty"`
}

// TaskOrigin says which schedule fired a task, and for which fire time.
type TaskOrigin struct {
	Schedule string    `json:"schedule"`
	FireTime time.Time `json:"fire_time"`
}

// ValidateScheduleName explains why a schedule name is unusable, or returns
// nil. Names follow the rules of task type names, so they read the same in
// URLs, logs and metrics.
func ValidateScheduleName(name string) error { return validateName("schedule name", name) }
