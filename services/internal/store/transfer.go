package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/metrics"
)

// TransferParams describe one state change.
type TransferParams struct {
	TaskID int64
	From   contracts.Status
	To     contracts.Status
	Reason string
	// Actor overrides the store's default actor for the history row.
	Actor string
	// Attempt, when set, fences the write: it applies only while the task's
	// attempt is still this value, so a zombie executor cannot overwrite a
	// newer attempt's outcome.
	Attempt *int
	// Claim starts a new attempt: attempt+1, executor_addr = Executor and a
	// fresh heartbeat. Used for READY -> RUNNING.
	Claim    bool
	Executor string
	// LastError, when set, is stored on the task.
	LastError *string
	// NextRunTimeMs, when set, becomes the task's due time.
	NextRunTimeMs *int64
	// ClearExecutor empties executor_addr and the heartbeat.
	ClearExecutor bool
	// IncrementRetry counts one more retry (FAILED/TIMEOUT -> RETRYING);
	// ResetRetries starts a fresh round (an operator's re-run).
	IncrementRetry bool
	ResetRetries   bool
	// RecordRejection makes a fenced-off write leave a trace: when the
	// transfer loses because the attempt is stale or the task moved on, a
	// history row (from = to = the current state) and a task.rejected event
	// say who tried what, and why it was refused.
	RecordRejection bool
	// Also runs extra writes inside the transfer's transaction, after the
	// history and outbox rows; an error rolls all of it back.
	Also func(ctx context.Context, tx *sql.Tx) error
}

// TransferResult is what the task looks like after a transfer.
type TransferResult struct {
	TaskID        int64
	Type          string
	Priority      contracts.Priority
	Attempt       int
	NextRunTimeMs int64
	EventID       string
}

// Transfer is the one function that changes a task's state. In a single
// transaction it compare-and-sets the row (WHERE id=? AND status=from [AND
// attempt=?]), inserts the history row and inserts the outbox event. A lost
// race returns a *ConflictError; a change the transition table forbids
// returns an *IllegalTransitionError without touching the database.
func (s *Store) Transfer(ctx context.Context, p TransferParams) (*TransferResult, error) {
	res, err := s.TransferChain(ctx, p)
	if err != nil {
		return nil, err
	}
	return res[len(res)-1], nil
}

// TransferChain performs several transfers of one or more tasks in one
// transaction (FAILED -> RETRYING right after RUNNING -> FAILED, say): all
// of them commit, each with its history row and event, or none does.
func (s *Store) TransferChain(ctx context.Context, steps ...TransferParams) ([]*TransferResult, error) {
	for _, p := range steps {
		if !contracts.CanTransition(p.From, p.To) || p.From == contracts.StatusNone {
			return nil, &IllegalTransitionError{From: p.From, To: p.To}
		}
	}
	out := make([]*TransferResult, len(steps))
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		for i, p := range steps {
			var err error
			if out[i], err = s.transferTx(ctx, tx, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		var ce *ConflictError
		if errors.As(err, &ce) {
			metrics.TransferConflicts.WithLabelValues(string(ce.To)).Inc()
			for _, p := range steps {
				if p.RecordRejection && p.TaskID == ce.TaskID && p.To == ce.To {
					s.recordRejection(ctx, p, ce)
				}
			}
		}
		return nil, err
	}
	for _, p := range steps {
		metrics.Transfers.WithLabelValues(string(p.To)).Inc()
	}
	s.notify()
	return out, nil
}

// recordRejection writes the trace of a refused write in its own
// transaction; failing to write it loses only the trace, so errors are
// swallowed.
func (s *Store) recordRejection(ctx context.Context, p TransferParams, ce *ConflictError) {
	want := "?"
	if p.Attempt != nil {
		want = strconv.Itoa(*p.Attempt)
	}
	reason := fmt.Sprintf("rejected %s->%s from attempt %s: the task is %s at attempt %d (%s)",
		p.From, p.To, want, ce.Actual, ce.ActualAttempt, p.Reason)
	err := s.inTx(context.WithoutCancel(ctx), func(tx *sql.Tx) error {
		var taskType string
		var prio int
		var next int64
		if err := tx.QueryRowContext(ctx, `SELECT task_type, priority, next_run_time FROM tasks WHERE id = ?`, p.TaskID).
			Scan(&taskType, &prio, &next); err != nil {
			return err
		}
		_, err := recordMany(ctx, tx, []transferRecord{{
			taskID: p.TaskID, taskType: taskType, from: ce.Actual, to: ce.Actual, attempt: ce.ActualAttempt,
			priority: contracts.PriorityFromRank(prio), nextRunTimeMs: next, reason: reason,
			actor: s.actorOr(p.Actor), at: s.now().UTC(), subject: events.SubjectTaskRejected,
		}})
		return err
	})
	if err == nil {
		s.notify()
	}
}

func (s *Store) transferTx(ctx context.Context, tx *sql.Tx, p TransferParams) (*TransferResult, error) {
	at := s.now().UTC()
	set := []string{"status = ?", "updated_at = ?"}
	args := []any{string(p.To), at}
	if p.Claim {
		set = append(set, "attempt = attempt + 1", "executor_addr = ?", "last_heartbeat_time = ?", "started_at = ?")
		args = append(args, p.Executor, at, at)
	}
	if p.IncrementRetry {
		set = append(set, "retry_count = retry_count + 1")
	}
	if p.ResetRetries {
		set = append(set, "retry_count = 0")
	}
	if p.To == contracts.StatusReady {
		// A task that becomes READY again must be dispatched again.
		set = append(set, "dispatched_at = NULL")
	}
	if p.ClearExecutor {
		set = append(set, "executor_addr = NULL", "last_heartbeat_time = NULL")
	}
	if p.LastError != nil {
		set = append(set, "last_error = ?")
		args = append(args, truncate(*p.LastError, 4000))
	}
	if p.NextRunTimeMs != nil {
		set = append(set, "next_run_time = ?")
		args = append(args, *p.NextRunTimeMs)
	}
	where := "id = ? AND status = ?"
	args = append(args, p.TaskID, string(p.From))
	if p.Attempt != nil {
		where += " AND attempt = ?"
		args = append(args, *p.Attempt)
	}
	r, err := tx.ExecContext(ctx, "UPDATE tasks SET "+strings.Join(set, ", ")+" WHERE "+where, args...)
	if err != nil {
		return nil, fmt.Errorf("transfer task %d %s->%s: %w", p.TaskID, p.From, p.To, err)
	}
	n, err := r.RowsAffected()
	if err != nil {
		return nil, fmt.Errorf("transfer task %d: rows affected: %w", p.TaskID, err)
	}
	var (
		res  TransferResult
		prio int
		cur  string
	)
	row := tx.QueryRowContext(ctx, `SELECT task_type, priority, attempt, next_run_time, status FROM tasks WHERE id = ?`, p.TaskID)
	if err := row.Scan(&res.Type, &prio, &res.Attempt, &res.NextRunTimeMs, &cur); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("task %d: %w", p.TaskID, ErrNotFound)
		}
		return nil, fmt.Errorf("transfer task %d: reload: %w", p.TaskID, err)
	}
	if n == 0 {
		ce := &ConflictError{TaskID: p.TaskID, From: p.From, To: p.To, Actual: contracts.Status(cur),
			ActualAttempt: res.Attempt, Fenced: p.Attempt != nil}
		if p.Attempt != nil {
			ce.WantAttempt = *p.Attempt
		}
		return nil, ce
	}
	res.TaskID = p.TaskID
	res.Priority = contracts.PriorityFromRank(prio)
	res.EventID, err = s.recordTx(ctx, tx, transferRecord{
		taskID: p.TaskID, taskType: res.Type, from: p.From, to: p.To, attempt: res.Attempt,
		priority: res.Priority, nextRunTimeMs: res.NextRunTimeMs, reason: p.Reason,
		actor: s.actorOr(p.Actor), at: at,
	})
	if err != nil {
		return nil, err
	}
	if p.Also != nil {
		if err := p.Also(ctx, tx); err != nil {
			return nil, fmt.Errorf("transfer task %d: %w", p.TaskID, err)
		}
	}
	return &res, nil
}

type transferRecord struct {
	taskID        int64
	taskType      string
	from, to      contracts.Status
	attempt       int
	priority      contracts.Priority
	nextRunTimeMs int64
	reason        string
	actor         string
	at            time.Time
	// subject overrides the event subject (rejections are not transfers).
	subject string
}

func (s *Store) record(ctx context.Context, tx *sql.Tx, r transferRecord) error {
	_, err := s.recordTx(ctx, tx, r)
	return err
}

// recordTx writes the history row and its outbox event; both share one
// event ID, which the relay later uses as Nats-Msg-Id.
func (s *Store) recordTx(ctx context.Context, tx *sql.Tx, r transferRecord) (string, error) {
	ids, err := recordMany(ctx, tx, []transferRecord{r})
	if err != nil {
		return "", fmt.Errorf("task %d: %w", r.taskID, err)
	}
	return ids[0], nil
}

// outboxEvent is one row for the relay to publish.
type outboxEvent struct {
	ID            string
	Subject       string
	Type          string
	CorrelationID string
	Payload       []byte
}

// insertOutbox queues an event in the caller's transaction; the relay
// publishes it once the transaction commits. Every event ax publishes about
// a state change goes through here.
func insertOutbox(ctx context.Context, tx *sql.Tx, e outboxEvent) error {
	if e.ID == "" {
		e.ID = ulid.Make().String()
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO outbox (event_id, subject, event_type, correlation_id, payload)
		VALUES (?, ?, ?, ?, ?)`, e.ID, e.Subject, e.Type, e.CorrelationID, e.Payload); err != nil {
		return fmt.Errorf("insert outbox event %s: %w", e.Subject, err)
	}
	return nil
}

// truncate cuts s to at most n bytes without splitting a UTF-8 sequence,
// which strict mode would refuse to store.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - 3
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}
