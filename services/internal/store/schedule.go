package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/axsched/ax/contracts"
)

// Schedule is a row of schedules.
type Schedule struct {
	ID           int64
	Name         string
	Cron         string
	TimeZone     string
	Template     contracts.TaskTemplate
	Overlap      string
	CatchUp      string
	CatchUpLimit int
	Paused       bool
	// NextFireMs is the next fire time, Unix ms on the scheduler clock.
	NextFireMs int64
	// LastFireMs and LastTaskID are 0 before the first fire.
	LastFireMs int64
	LastTaskID int64
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// API converts the row to its public JSON shape.
func (s *Schedule) API() contracts.Schedule {
	out := contracts.Schedule{
		Name: s.Name, Cron: s.Cron, TimeZone: s.TimeZone, Task: s.Template, Overlap: s.Overlap,
		CatchUp: s.CatchUp, CatchUpLimit: s.CatchUpLimit, Paused: s.Paused,
		NextFireTime: time.UnixMilli(s.NextFireMs).UTC(), CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt,
	}
	if s.LastFireMs != 0 {
		t := time.UnixMilli(s.LastFireMs).UTC()
		out.LastFireTime = &t
	}
	if s.LastTaskID != 0 {
		out.LastTaskID = strconv.FormatInt(s.LastTaskID, 10)
	}
	return out
}

const scheduleColumns = `id, name, cron_expr, time_zone, template, overlap, catch_up, catch_up_limit, paused,
	next_fire_time, last_fire_time, last_task_id, created_at, updated_at`

func scanSchedule(r rowScanner) (*Schedule, error) {
	var (
		s        Schedule
		template []byte
		lastFire sql.NullInt64
		lastTask sql.NullInt64
	)
	err := r.Scan(&s.ID, &s.Name, &s.Cron, &s.TimeZone, &template, &s.Overlap, &s.CatchUp, &s.CatchUpLimit,
		&s.Paused, &s.NextFireMs, &lastFire, &lastTask, &s.CreatedAt, &s.UpdatedAt)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(template, &s.Template); err != nil {
		return nil, fmt.Errorf("schedule %s: stored template: %w", s.Name, err)
	}
	s.LastFireMs, s.LastTaskID = lastFire.Int64, lastTask.Int64
	return &s, nil
}

// CreateSchedule inserts a schedule; a taken name is ErrNameTaken.
func (s *Store) CreateSchedule(ctx context.Context, sc Schedule) (*Schedule, error) {
	template, err := json.Marshal(sc.Template)
	if err != nil {
		return nil, fmt.Errorf("create schedule %s: %w", sc.Name, err)
	}
	_, err = s.db.ExecContext(ctx, `INSERT INTO schedules (name, cron_expr, time_zone, template, overlap, catch_up,
		catch_up_limit, paused, next_fire_time) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		sc.Name, sc.Cron, sc.TimeZone, template, sc.Overlap, sc.CatchUp, sc.CatchUpLimit, sc.Paused, sc.NextFireMs)
	if isDuplicateKey(err) {
		return nil, fmt.Errorf("create schedule %q: %w", sc.Name, ErrNameTaken)
	}
	if err != nil {
		return nil, fmt.Errorf("create schedule %s: %w", sc.Name, err)
	}
	return s.GetSchedule(ctx, sc.Name)
}

// GetSchedule loads a schedule by name.
func (s *Store) GetSchedule(ctx context.Context, name string) (*Schedule, error) {
	sc, err := scanSchedule(s.db.QueryRowContext(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("schedule %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get schedule %s: %w", name, err)
	}
	return sc, nil
}

// ListSchedules returns up to limit schedules named after after, in name
// order.
func (s *Store) ListSchedules(ctx context.Context, after string, limit int) ([]Schedule, error) {
	return s.querySchedules(ctx, `SELECT `+scheduleColumns+` FROM schedules WHERE name > ? ORDER BY name LIMIT ?`, after, limit)
}

// DueSchedules returns up to limit unpaused schedules whose next fire time
// is at or before nowMs, earliest first.
func (s *Store) DueSchedules(ctx context.Context, nowMs int64, limit int) ([]Schedule, error) {
	return s.querySchedules(ctx, `SELECT `+scheduleColumns+` FROM schedules
		WHERE paused = FALSE AND next_fire_time <= ? ORDER BY next_fire_time LIMIT ?`, nowMs, limit)
}

// queryer is a pool or a transaction.
type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func (s *Store) querySchedules(ctx context.Context, q string, args ...any) ([]Schedule, error) {
	return querySchedules(ctx, s.db, q, args...)
}

func querySchedules(ctx context.Context, db queryer, q string, args ...any) ([]Schedule, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read schedules: %w", err)
	}
	defer rows.Close()
	var out []Schedule
	for rows.Next() {
		sc, err := scanSchedule(rows)
		if err != nil {
			return nil, fmt.Errorf("read schedules: %w", err)
		}
		out = append(out, *sc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read schedules: %w", err)
	}
	return out, nil
}

// NextScheduleFire is the earliest next fire time of the unpaused
// schedules, or ok=false when there is none.
func (s *Store) NextScheduleFire(ctx context.Context) (ms int64, ok bool, err error) {
	var v sql.NullInt64
	if err := s.db.QueryRowContext(ctx, `SELECT MIN(next_fire_time) FROM schedules WHERE paused = FALSE`).Scan(&v); err != nil {
		return 0, false, fmt.Errorf("next schedule fire: %w", err)
	}
	return v.Int64, v.Valid, nil
}

// UpdateSchedule replaces a schedule's definition (everything but its name
// and fire history) with sc's, and its next fire time with sc.NextFireMs.
func (s *Store) UpdateSchedule(ctx context.Context, sc Schedule) (*Schedule, error) {
	template, err := json.Marshal(sc.Template)
	if err != nil {
		return nil, fmt.Errorf("update schedule %s: %w", sc.Name, err)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE schedules SET cron_expr = ?, time_zone = ?, template = ?, overlap = ?,
		catch_up = ?, catch_up_limit = ?, paused = ?, next_fire_time = ? WHERE name = ?`,
		sc.Cron, sc.TimeZone, template, sc.Overlap, sc.CatchUp, sc.CatchUpLimit, sc.Paused, sc.NextFireMs, sc.Name)
	if err := affectedOne(res, err, sc.Name); err != nil {
		return nil, fmt.Errorf("update schedule: %w", err)
	}
	return s.GetSchedule(ctx, sc.Name)
}

// PauseSchedule pauses or resumes a schedule. Resuming sets the next fire
// time to nextMs: fire times that passed while it was paused are not
// caught up.
func (s *Store) PauseSchedule(ctx context.Context, name string, paused bool, nextMs int64) (*Schedule, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE schedules SET paused = ?,
		next_fire_time = IF(?, next_fire_time, ?) WHERE name = ?`, paused, paused, nextMs, name)
	if err := affectedOne(res, err, name); err != nil {
		return nil, fmt.Errorf("pause schedule: %w", err)
	}
	return s.GetSchedule(ctx, name)
}

// DeleteSchedule removes a schedule. Its fires' records stay, so tasks it
// fired still name it.
func (s *Store) DeleteSchedule(ctx context.Context, name string) error {
	res, err := s.db.ExecContext(ctx, `DELETE FROM schedules WHERE name = ?`, name)
	if err := affectedOne(res, err, name); err != nil {
		return fmt.Errorf("delete schedule: %w", err)
	}
	return nil
}

func affectedOne(res sql.Result, err error, name string) error {
	if err != nil {
		return fmt.Errorf("schedule %s: %w", name, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("schedule %s: %w", name, err)
	} else if n == 0 {
		return fmt.Errorf("schedule %q: %w", name, ErrNotFound)
	}
	return nil
}

// TaskOrigin returns the schedule and fire time of a task a schedule fired,
// or nil for any other task.
func (s *Store) TaskOrigin(ctx context.Context, taskID int64) (*contracts.TaskOrigin, error) {
	var (
		name string
		ms   int64
	)
	err := s.db.QueryRowContext(ctx, `SELECT schedule_name, fire_time FROM schedule_fires WHERE task_id = ? LIMIT 1`, taskID).Scan(&name, &ms)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("origin of task %d: %w", taskID, err)
	}
	return &contracts.TaskOrigin{Schedule: name, FireTime: time.UnixMilli(ms).UTC()}, nil
}
