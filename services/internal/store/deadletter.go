package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/metrics"
)

// ErrAlreadyRetried: the dead letter was re-run before.
var ErrAlreadyRetried = errors.New("dead letter already re-run")

// DeadLetter is a row of dead_letters: a task that failed for good and
// waits for an operator.
type DeadLetter struct {
	ID         int64
	TaskID     int64
	Type       string
	Status     contracts.Status
	Attempt    int
	RetryCount int
	LastError  string
	CreatedAt  time.Time
	RetriedAt  *time.Time
	RetriedBy  string
}

// NewDeadLetter is what a final failure records.
type NewDeadLetter struct {
	TaskID     int64
	Type       string
	Status     contracts.Status
	Attempt    int
	RetryCount int
	LastError  string
}

// InsertDeadLetter returns a TransferParams.Also hook that files the dead
// letter in the same transaction as the final transfer, so a task is never
// FAILED for good without its row (nor the reverse).
func InsertDeadLetter(d NewDeadLetter) func(ctx context.Context, tx Execer) error {
	return func(ctx context.Context, tx Execer) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO dead_letters (task_id, task_type, status, attempt, retry_count, last_error)
			VALUES (?, ?, ?, ?, ?, ?)`, d.TaskID, d.Type, string(d.Status), d.Attempt, d.RetryCount, Truncate(d.LastError, 8000))
		if err != nil {
			return fmt.Errorf("insert dead letter of task %d: %w", d.TaskID, err)
		}
		return nil
	}
}

const deadLetterColumns = `id, task_id, task_type, status, attempt, retry_count, last_error, created_at, retried_at, COALESCE(retried_by, '')`

func scanDeadLetter(r rowScanner) (*DeadLetter, error) {
	var d DeadLetter
	var status string
	var retried sql.NullTime
	if err := r.Scan(&d.ID, &d.TaskID, &d.Type, &status, &d.Attempt, &d.RetryCount, &d.LastError,
		&d.CreatedAt, &retried, &d.RetriedBy); err != nil {
		return nil, err
	}
	d.Status = contracts.Status(status)
	if retried.Valid {
		t := retried.Time
		d.RetriedAt = &t
	}
	return &d, nil
}

// DeadLetterQuery selects dead letters, newest first.
type DeadLetterQuery struct {
	// All includes letters already re-run; by default only open ones.
	All bool
	// Type filters by task type when set.
	Type string
	// TaskID filters by task when set (idx_dead_letters_task).
	TaskID int64
	// BeforeID pages: only letters with a smaller ID.
	BeforeID int64
	Limit    int
}

// ListDeadLetters returns dead letters, newest first.
func (s *Store) ListDeadLetters(ctx context.Context, q DeadLetterQuery) ([]DeadLetter, error) {
	if q.Limit <= 0 || q.Limit > 1000 {
		q.Limit = 100
	}
	where, args := "1 = 1", []any{}
	if !q.All {
		where += " AND retried_at IS NULL"
	}
	if q.Type != "" {
		where += " AND task_type = ?"
		args = append(args, q.Type)
	}
	if q.TaskID > 0 {
		where += " AND task_id = ?"
		args = append(args, q.TaskID)
	}
	if q.BeforeID > 0 {
		where += " AND id < ?"
		args = append(args, q.BeforeID)
	}
	args = append(args, q.Limit)
	rows, err := s.db.QueryContext(ctx, `SELECT `+deadLetterColumns+` FROM dead_letters WHERE `+where+` ORDER BY id DESC LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("list dead letters: %w", err)
	}
	defer rows.Close()
	var out []DeadLetter
	for rows.Next() {
		d, err := scanDeadLetter(rows)
		if err != nil {
			return nil, fmt.Errorf("scan dead letter: %w", err)
		}
		out = append(out, *d)
	}
	return out, rows.Err()
}

// RetryDeadLetter re-runs the task of an open dead letter: in one
// transaction the letter is marked re-run by actor and the task goes
// FAILED/TIMEOUT -> RETRYING with a fresh round of retries, due at once. The
// history row names the actor and the letter, linking the new attempt to the
// failed one.
func (s *Store) RetryDeadLetter(ctx context.Context, id int64, actor string, dueMs int64) (*DeadLetter, error) {
	var out *DeadLetter
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		d, err := scanDeadLetter(tx.QueryRowContext(ctx, `SELECT `+deadLetterColumns+` FROM dead_letters WHERE id = ? FOR UPDATE`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("dead letter %d: %w", id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("load dead letter %d: %w", id, err)
		}
		if d.RetriedAt != nil {
			return fmt.Errorf("dead letter %d was re-run by %s at %s: %w", id, d.RetriedBy, d.RetriedAt.Format(time.RFC3339), ErrAlreadyRetried)
		}
		attempt := d.Attempt
		_, err = s.transferTx(ctx, tx, TransferParams{
			TaskID: d.TaskID, From: d.Status, To: contracts.StatusRetrying, Attempt: &attempt,
			ResetRetries: true, NextRunTimeMs: &dueMs, Actor: actor,
			Reason: fmt.Sprintf("re-run from dead letter %d by %s after attempt %d ended %s: %s",
				id, actor, d.Attempt, d.Status, Truncate(d.LastError, 500)),
		})
		if err != nil {
			return err
		}
		// A workflow step ended already: its next end must not count again,
		// so its row no longer vouches for it (migration 0019).
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET workflow_role = workflow_role | ? WHERE id = ? AND workflow_role & ? <> 0`,
			roleEndedBefore, d.TaskID, roleStep); err != nil {
			return fmt.Errorf("mark task %d re-run: %w", d.TaskID, err)
		}
		now := s.now().UTC()
		if _, err := tx.ExecContext(ctx, `UPDATE dead_letters SET retried_at = ?, retried_by = ? WHERE id = ?`, now, Truncate(actor, 255), id); err != nil {
			return fmt.Errorf("mark dead letter %d re-run: %w", id, err)
		}
		d.RetriedAt, d.RetriedBy = &now, actor
		out = d
		return nil
	})
	if err != nil {
		return nil, err
	}
	metrics.Transfers.WithLabelValues(string(contracts.StatusRetrying)).Inc()
	s.notify()
	return out, nil
}
