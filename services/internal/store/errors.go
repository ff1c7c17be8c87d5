package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"net"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/contracts"
)

// Sentinel errors callers branch on.
var (
	// ErrNotFound: no task (or type) with that ID.
	ErrNotFound = errors.New("not found")
	// ErrIllegalTransition: the transition table forbids the change.
	ErrIllegalTransition = errors.New("illegal transition")
	// ErrConflict: the task is not in the expected state or attempt any
	// more; somebody else moved it first. Match with errors.Is.
	ErrConflict = errors.New("transfer conflict")
	// ErrIDTaken: a snowflake collision on insert; retry with a new ID.
	ErrIDTaken = errors.New("task id already used")
)

// ConflictError says what the task looked like when a transfer lost its
// compare-and-set.
type ConflictError struct {
	TaskID        int64
	From, To      contracts.Status
	Actual        contracts.Status
	WantAttempt   int
	ActualAttempt int
	Fenced        bool
	// NotDue: the state and attempt held, but the task is due at DueAtMs,
	// later than the transfer's TransferParams.DueByMs.
	NotDue           bool
	DueAtMs, DueByMs int64
}

func (e *ConflictError) Error() string {
	if e.NotDue {
		return fmt.Sprintf("task %d: transfer %s->%s refused: the task is due at %d, after %d (rescheduled since)",
			e.TaskID, e.From, e.To, e.DueAtMs, e.DueByMs)
	}
	if e.Fenced && e.Actual == e.From {
		return fmt.Sprintf("task %d: transfer %s->%s fenced off: attempt %d is stale, current attempt is %d",
			e.TaskID, e.From, e.To, e.WantAttempt, e.ActualAttempt)
	}
	return fmt.Sprintf("task %d: transfer %s->%s conflicts: task is %s (attempt %d)",
		e.TaskID, e.From, e.To, e.Actual, e.ActualAttempt)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// IllegalTransitionError names the refused change.
type IllegalTransitionError struct {
	From, To contracts.Status
}

func (e *IllegalTransitionError) Error() string {
	from := string(e.From)
	if from == "" {
		from = "(new)"
	}
	return fmt.Sprintf("illegal transition %s -> %s", from, e.To)
}

// Is makes errors.Is(err, ErrIllegalTransition) true.
func (e *IllegalTransitionError) Is(target error) bool { return target == ErrIllegalTransition }

// IsUnreachable reports whether err says MySQL did not answer in time or
// the connection broke (a frozen or restarting server, a partition), as
// opposed to MySQL refusing the statement: the same statement may succeed
// when tried again later.
func IsUnreachable(err error) bool {
	var me *mysql.MySQLError
	if err == nil || errors.As(err, &me) {
		return false
	}
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, mysql.ErrInvalidConn) || errors.As(err, &ne)
}
