// Package contracts holds ax's public vocabulary: task states and the one
// transition table, the JSON shapes of the HTTP API, error codes and the
// OpenAPI document. It imports nothing from the rest of ax so that clients,
// services and tests all agree on one definition.
package contracts

import (
	"fmt"
	"slices"
)

// Status is the state of a task. The string values are stored in MySQL and
// sent on the wire, so they never change once released.
type Status string

// The task states. Each comment says which service moves a task into the
// state and which moves it out, so the table below can be read as a contract
// between services.
const (
	// StatusNone is the "from" of a task's first history row: the task did
	// not exist before the submitter created it.
	StatusNone Status = ""
	// StatusReady: waiting to run at next_run_time. In: submitter (create),
	// reaper (lease lost), timer/retry (after RETRYING), dependency release
	// (after SUSPEND). Out: executor claims it (RUNNING), an operator cancels
	// it (CANCELLED). READY -> RETRYING stays allowed for executors of
	// earlier versions, which handed a task back when its type's pool was
	// full; a task now waits in its lane instead.
	StatusReady Status = "READY"
	// StatusRunning: claimed by one executor, which holds the Redis lease and
	// the current attempt number. Out: the executor records SUCCESS, FAILED,
	// TIMEOUT or CANCELLED; the reaper returns it to READY when the lease
	// expired, or forces TIMEOUT when it ran past timeout + grace.
	StatusRunning Status = "RUNNING"
	// StatusSuccess is terminal: the handler returned without error. A re-run
	// is an explicit new task.
	StatusSuccess Status = "SUCCESS"
	// StatusFailed: the handler returned an error. Out: the retry policy moves
	// it to RETRYING while attempts remain; otherwise it stays FAILED.
	StatusFailed Status = "FAILED"
	// StatusTimeout: the attempt ran past its deadline (executor) or stopped
	// heartbeating past timeout + grace (reaper). Out: RETRYING, like FAILED.
	StatusTimeout Status = "TIMEOUT"
	// StatusCancelled is terminal: an operator or client cancelled the task.
	StatusCancelled Status = "CANCELLED"
	// StatusSuspend: created with parents (a workflow step, or a task
	// submitted with parents), or a compensation not yet needed. Out: READY
	// when every parent ended as its condition asks, by the final transfer
	// of the last of them (or the reaper's reconciler); CANCELLED when one
	// ended otherwise, or by an operator or a workflow's cancel.
	StatusSuspend Status = "SUSPEND"
	// StatusRetrying: waiting out a backoff before the next attempt. Out:
	// READY when the backoff elapses, CANCELLED by an operator.
	StatusRetrying Status = "RETRYING"
)

// Statuses lists every state in a stable order.
var Statuses = []Status{
	StatusReady, StatusRunning, StatusSuccess, StatusFailed,
	StatusTimeout, StatusCancelled, StatusSuspend, StatusRetrying,
}

// Transitions is the only authority on which state changes are legal. The
// task store refuses any transfer that is not listed here, whoever asks.
var Transitions = map[Status][]Status{
	StatusNone:      {StatusReady, StatusSuspend},
	StatusReady:     {StatusRunning, StatusCancelled, StatusRetrying},
	StatusRunning:   {StatusSuccess, StatusFailed, StatusTimeout, StatusCancelled, StatusReady},
	StatusFailed:    {StatusRetrying},
	StatusTimeout:   {StatusRetrying},
	StatusRetrying:  {StatusReady, StatusCancelled},
	StatusSuspend:   {StatusReady, StatusCancelled},
	StatusSuccess:   nil,
	StatusCancelled: nil,
}

// CanTransition reports whether a task may move from one state to another.
func CanTransition(from, to Status) bool {
	return slices.Contains(Transitions[from], to)
}

// Valid reports whether s is one of the defined states (StatusNone is not).
func (s Status) Valid() bool { return slices.Contains(Statuses, s) }

// Terminal reports whether no transition leaves s.
func (s Status) Terminal() bool { return s.Valid() && len(Transitions[s]) == 0 }

// ParseStatus turns a wire value into a Status or explains why it cannot.
func ParseStatus(v string) (Status, error) {
	s := Status(v)
	if !s.Valid() {
		return "", fmt.Errorf("unknown task status %q", v)
	}
	return s, nil
}
