package store

import (
	"context"
	"fmt"
)

// SetResult returns a TransferParams.Also hook that stores a handler's
// result in the same transaction as the task's SUCCESS, so a finished task
// and its result are seen together or not at all.
func SetResult(taskID int64, result []byte) func(ctx context.Context, tx Execer) error {
	return func(ctx context.Context, tx Execer) error {
		if _, err := tx.ExecContext(ctx, `UPDATE tasks SET result = ? WHERE id = ?`, result, taskID); err != nil {
			return fmt.Errorf("store result of task %d: %w", taskID, err)
		}
		return nil
	}
}

// ProgressParams are one progress report of a running attempt.
type ProgressParams struct {
	TaskID  int64
	Attempt int
	Percent int
	Message string
}

// SetProgress stores a progress report, fenced like an outcome: only while
// the task is RUNNING this attempt, so a zombie's report cannot overwrite
// its successor's. It reports whether the row was written.
func (s *Store) SetProgress(ctx context.Context, p ProgressParams) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE tasks SET progress_pct = ?, progress_message = ?, progress_at = NOW(3)
		WHERE id = ? AND attempt = ? AND status = 'RUNNING'`, p.Percent, p.Message, p.TaskID, p.Attempt)
	if err != nil {
		return false, fmt.Errorf("store progress of task %d: %w", p.TaskID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("store progress of task %d: %w", p.TaskID, err)
	}
	return n == 1, nil
}
