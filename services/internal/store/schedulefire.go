package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/axsched/ax/contracts"
)

// Errors of FireSchedule.
var (
	// ErrFired: this (schedule, fire time) has a fire already, made by
	// another timer; nothing was written.
	ErrFired = errors.New("fire time fired already")
	// ErrScheduleMoved: the schedule is not as read any more (another
	// timer advanced it, or it was paused, changed or deleted, or another
	// timer holds it right now); nothing was written.
	ErrScheduleMoved = errors.New("schedule moved")
)

// Fire is one step of a schedule: fire FireMs (unless Task is nil) and
// move the schedule's next fire time from ExpectNextMs to NextMs.
type Fire struct {
	ScheduleID int64
	Name       string
	// ExpectNextMs fences the step: the schedule's next fire time as the
	// timer read it.
	ExpectNextMs int64
	NextMs       int64
	// FireMs is the fire time, FiredAtMs the clock reading at which the
	// timer fires it (never earlier).
	FireMs, FiredAtMs int64
	// Task is the task to create; nil only advances the schedule (missed
	// fire times passed over by the catch-up policy).
	Task *NewTask
	// SkipWhileRunning passes over the fire time, recording it without a
	// task, while the last fire's task is not final (overlap skip).
	SkipWhileRunning bool
}

// FireOutcome is what FireSchedule did.
type FireOutcome struct {
	// TaskID is the created task, 0 when none was.
	TaskID int64
	// Overlapped: the fire time was passed over because the previous
	// fire's task was not final.
	Overlapped bool
}

// FireSchedule takes one step of a schedule in one transaction: it locks
// the schedule row if it still has next fire time ExpectNextMs (skipping a
// row another timer holds), records the fire in schedule_fires, creates
// the task with its history row, and advances the schedule. The primary
// key of schedule_fires is the arbiter of "one task per fire time": a
// second fire of the same time fails with ErrFired and writes nothing,
// whatever the lock and fence decided. A snowflake collision is
// ErrIDTaken: retry with a fresh task ID.
func (s *Store) FireSchedule(ctx context.Context, f Fire) (FireOutcome, error) {
	var out FireOutcome
	at := s.now().UTC()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var lastTask sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT last_task_id FROM schedules
			WHERE id = ? AND next_fire_time = ? AND paused = FALSE FOR UPDATE SKIP LOCKED`,
			f.ScheduleID, f.ExpectNextMs).Scan(&lastTask)
		if errors.Is(err, sql.ErrNoRows) {
			return ErrScheduleMoved
		}
		if err != nil {
			return fmt.Errorf("lock schedule: %w", err)
		}
		if f.Task == nil {
			return advanceSchedule(ctx, tx, f, nil)
		}
		if f.SkipWhileRunning && lastTask.Valid {
			if out.Overlapped, err = taskUnfinished(ctx, tx, lastTask.Int64); err != nil {
				return err
			}
		}
		var taskID any
		if !out.Overlapped {
			taskID = f.Task.ID
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO schedule_fires (schedule_id, fire_time, schedule_name, task_id, fired_at)
			VALUES (?, ?, ?, ?, ?)`, f.ScheduleID, f.FireMs, f.Name, taskID, f.FiredAtMs)
		if isDuplicateKey(err) {
			return ErrFired
		}
		if err != nil {
			return fmt.Errorf("record fire: %w", err)
		}
		if out.Overlapped {
			return advanceSchedule(ctx, tx, f, nil)
		}
		nts := []NewTask{*f.Task}
		if _, err := insertTaskRows(ctx, tx, nts, at); err != nil {
			return err
		}
		if _, err := recordMany(ctx, tx, s.creationRecords(nts, map[int64]bool{f.Task.ID: true}, at)); err != nil {
			return err
		}
		out.TaskID = f.Task.ID
		return advanceSchedule(ctx, tx, f, &f.Task.ID)
	})
	if err != nil {
		return FireOutcome{}, fmt.Errorf("fire schedule %s at %d: %w", f.Name, f.FireMs, err)
	}
	if out.TaskID != 0 {
		s.notify()
	}
	return out, nil
}

// advanceSchedule moves the locked schedule to its next fire time and, for
// a fire, records it as the last one.
func advanceSchedule(ctx context.Context, tx *sql.Tx, f Fire, taskID *int64) error {
	q, args := `UPDATE schedules SET next_fire_time = ? WHERE id = ?`, []any{f.NextMs, f.ScheduleID}
	if f.Task != nil {
		q = `UPDATE schedules SET next_fire_time = ?, last_fire_time = ?, last_task_id = COALESCE(?, last_task_id) WHERE id = ?`
		var id any
		if taskID != nil {
			id = *taskID
		}
		args = []any{f.NextMs, f.FireMs, id, f.ScheduleID}
	}
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("advance schedule: %w", err)
	}
	return nil
}

// taskUnfinished reports whether a task exists and is not in a final state
// (a task pruned by retention has finished).
func taskUnfinished(ctx context.Context, tx *sql.Tx, id int64) (bool, error) {
	var status string
	err := tx.QueryRowContext(ctx, `SELECT status FROM tasks WHERE id = ?`, id).Scan(&status)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("status of task %d: %w", id, err)
	}
	return !contracts.Status(status).Terminal(), nil
}

// ScheduleFireRow is a row of schedule_fires, for tests and the bench.
type ScheduleFireRow struct {
	FireMs, FiredAtMs, TaskID int64
}

// ScheduleFires lists a schedule's recorded fires, oldest first.
func (s *Store) ScheduleFires(ctx context.Context, scheduleID int64) ([]ScheduleFireRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT fire_time, fired_at, COALESCE(task_id, 0) FROM schedule_fires
		WHERE schedule_id = ? ORDER BY fire_time`, scheduleID)
	if err != nil {
		return nil, fmt.Errorf("fires of schedule %d: %w", scheduleID, err)
	}
	defer rows.Close()
	var out []ScheduleFireRow
	for rows.Next() {
		var r ScheduleFireRow
		if err := rows.Scan(&r.FireMs, &r.FiredAtMs, &r.TaskID); err != nil {
			return nil, fmt.Errorf("fires of schedule %d: %w", scheduleID, err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
