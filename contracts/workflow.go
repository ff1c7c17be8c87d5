package contracts

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Condition says which final state of a parent lets a child run.
type Condition string

// The three conditions of a dependency.
const (
	// WhenSuccess (the default): the parent ended SUCCESS.
	WhenSuccess Condition = "success"
	// WhenFailure: the parent failed for good (FAILED or TIMEOUT with no
	// retries left). A cancelled parent does not count as failed.
	WhenFailure Condition = "failure"
	// WhenAlways: the parent ended, whatever the outcome.
	WhenAlways Condition = "always"
)

// ParseCondition validates a condition; empty means WhenSuccess.
func ParseCondition(v string) (Condition, error) {
	switch c := Condition(v); c {
	case "":
		return WhenSuccess, nil
	case WhenSuccess, WhenFailure, WhenAlways:
		return c, nil
	}
	return "", fmt.Errorf("when %q is not one of success, failure, always", v)
}

// Accepts reports whether a parent that ended in final state s meets c.
func (c Condition) Accepts(s Status) bool {
	switch c {
	case WhenSuccess:
		return s == StatusSuccess
	case WhenFailure:
		return s == StatusFailed || s == StatusTimeout
	case WhenAlways:
		return true
	}
	return false
}

// MaxWorkflowSteps bounds the steps of one workflow, so that its creating
// transaction stays short.
const MaxWorkflowSteps = 1000

// MaxParents bounds the parents of a task given on POST /v1/tasks.
const MaxParents = 100

// WorkflowStatus is the state of a workflow.
type WorkflowStatus string

// The workflow states; see docs/workflows.md for the diagram.
const (
	// WorkflowRunning: steps are still to end, and none failed unhandled.
	WorkflowRunning WorkflowStatus = "RUNNING"
	// WorkflowSucceeded: every step ended and none failed unhandled.
	WorkflowSucceeded WorkflowStatus = "SUCCEEDED"
	// WorkflowFailed: a step failed for good with no failure branch and
	// there was nothing to compensate.
	WorkflowFailed WorkflowStatus = "FAILED"
	// WorkflowCompensating: a step failed for good and the compensations
	// of the succeeded steps run.
	WorkflowCompensating WorkflowStatus = "COMPENSATING"
	// WorkflowCompensated: every compensation succeeded.
	WorkflowCompensated WorkflowStatus = "COMPENSATED"
	// WorkflowCompensationFailed: a compensation did not succeed.
	WorkflowCompensationFailed WorkflowStatus = "COMPENSATION_FAILED"
	// WorkflowCancelled: cancelled through the API; its unfinished steps
	// were cancelled with it.
	WorkflowCancelled WorkflowStatus = "CANCELLED"
)

// Final reports whether the workflow will not change state again.
func (s WorkflowStatus) Final() bool {
	return s != WorkflowRunning && s != WorkflowCompensating
}

// WorkflowStatuses lists every workflow state.
var WorkflowStatuses = []WorkflowStatus{WorkflowRunning, WorkflowSucceeded, WorkflowFailed,
	WorkflowCompensating, WorkflowCompensated, WorkflowCompensationFailed, WorkflowCancelled}

// Valid reports whether s is a workflow state.
func (s WorkflowStatus) Valid() bool { return slices.Contains(WorkflowStatuses, s) }

// StepTask is what a workflow step or a compensation runs: the fields of
// SubmitRequest.
type StepTask struct {
	Type       string          `json:"type"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	Priority   string          `json:"priority,omitempty"`
	Delay      string          `json:"delay,omitempty"`
	RunAt      string          `json:"run_at,omitempty"`
	BizKey     string          `json:"biz_key,omitempty"`
	MaxRetries *int            `json:"max_retries,omitempty"`
	Timeout    string          `json:"timeout,omitempty"`
}

// Submit turns the fields into a SubmitRequest.
func (t StepTask) Submit() SubmitRequest {
	return SubmitRequest{Type: t.Type, Payload: t.Payload, Priority: t.Priority, Delay: t.Delay,
		RunAt: t.RunAt, BizKey: t.BizKey, MaxRetries: t.MaxRetries, Timeout: t.Timeout}
}

// WorkflowStep is one step of POST /v1/workflows.
type WorkflowStep struct {
	// Key names the step within its workflow.
	Key string `json:"key"`
	// StepTask holds the task fields, as in SubmitRequest; JSON has them
	// at the step's top level.
	StepTask
	// DependsOn lists the keys of the steps this one waits for.
	DependsOn []string `json:"depends_on,omitempty"`
	// When is the condition every parent must meet: success (default),
	// failure or always.
	When string `json:"when,omitempty"`
	// Compensate, when set, is the task that undoes this step; it runs
	// when a later step fails for good after this one succeeded.
	Compensate *StepTask `json:"compensate,omitempty"`
}

// WorkflowRequest is the body of POST /v1/workflows.
type WorkflowRequest struct {
	Name string `json:"name"`
	// BizKey deduplicates workflows per name, as biz_key does for tasks.
	BizKey string         `json:"biz_key,omitempty"`
	Steps  []WorkflowStep `json:"steps"`
}

// WorkflowStepState is a step as GET /v1/workflows/{id} shows it.
type WorkflowStepState struct {
	Key                string   `json:"key"`
	TaskID             string   `json:"task_id"`
	Type               string   `json:"type"`
	Status             Status   `json:"status"`
	DependsOn          []string `json:"depends_on,omitempty"`
	When               string   `json:"when,omitempty"`
	CompensationTaskID string   `json:"compensation_task_id,omitempty"`
	CompensationStatus Status   `json:"compensation_status,omitempty"`
}

// WorkflowListItem is a workflow as GET /v1/workflows lists it: its state
// without its steps (GET /v1/workflows/{id} has them).
type WorkflowListItem struct {
	ID     string         `json:"id"`
	Name   string         `json:"name"`
	BizKey string         `json:"biz_key,omitempty"`
	Status WorkflowStatus `json:"status"`
	Reason string         `json:"reason,omitempty"`
	// OpenSteps counts the steps that have not ended.
	OpenSteps int       `json:"open_steps"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// WorkflowList is the answer of GET /v1/workflows: a page, newest first,
// and the cursor of the next page when this one is full.
type WorkflowList struct {
	Workflows  []WorkflowListItem `json:"workflows"`
	NextCursor string             `json:"next_cursor,omitempty"`
}

// Workflow is the API view of a workflow.
type Workflow struct {
	ID           string              `json:"id"`
	Name         string              `json:"name"`
	BizKey       string              `json:"biz_key,omitempty"`
	Status       WorkflowStatus      `json:"status"`
	Reason       string              `json:"reason,omitempty"`
	Steps        []WorkflowStepState `json:"steps"`
	CreatedAt    time.Time           `json:"created_at"`
	UpdatedAt    time.Time           `json:"updated_at"`
	Deduplicated bool                `json:"deduplicated,omitempty"`
}

// WorkflowSummary names a workflow in a lineage.
type WorkflowSummary struct {
	ID     string         `json:"id"`
	Name   string         `json:"name"`
	BizKey string         `json:"biz_key,omitempty"`
	Status WorkflowStatus `json:"status"`
	Reason string         `json:"reason,omitempty"`
}

// LineageAttempt is one run of a task, read from its history.
type LineageAttempt struct {
	Attempt int `json:"attempt"`
	// Node is who claimed it (the executor's actor name).
	Node      string     `json:"node"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	// Outcome is the state the attempt ended in; empty while it runs.
	Outcome Status `json:"outcome,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// LineageTask is one task of a lineage.
type LineageTask struct {
	ID     string `json:"id"`
	Type   string `json:"type"`
	Status Status `json:"status"`
	BizKey string `json:"biz_key,omitempty"`
	// StepKey is the task's step in its workflow.
	StepKey string `json:"step_key,omitempty"`
	// Compensates is the step key this task undoes.
	Compensates string `json:"compensates,omitempty"`
	// Reason is that of the task's last transfer: why it is where it is.
	Reason    string           `json:"reason"`
	At        time.Time        `json:"at"`
	LastError string           `json:"last_error,omitempty"`
	CreatedAt time.Time        `json:"created_at"`
	Attempts  []LineageAttempt `json:"attempts,omitempty"`
}

// LineageEdge is one dependency: child waits for parent to end as When
// says.
type LineageEdge struct {
	Parent string    `json:"parent"`
	Child  string    `json:"child"`
	When   Condition `json:"when"`
}

// Lineage is the whole chain around a task: its workflow if it has one,
// every task of it (parents, children, compensations) and the edges.
type Lineage struct {
	Workflow *WorkflowSummary `json:"workflow,omitempty"`
	Tasks    []LineageTask    `json:"tasks"`
	Edges    []LineageEdge    `json:"edges"`
}

// LineageList is the body of GET /v1/lineage: one lineage per workflow or
// chain that holds the business key.
type LineageList struct {
	BizKey   string    `json:"biz_key"`
	Lineages []Lineage `json:"lineages"`
}
