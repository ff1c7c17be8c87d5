package store

import (
	"context"
	"fmt"
	"strings"
)

// OrderByFire is a schedule's tasks, latest fire time first.
const OrderByFire ListOrder = "fire"

// ScheduleTasksParams select a page of the tasks a schedule fired.
type ScheduleTasksParams struct {
	Schedule string
	Limit    int
	// BeforeFireMs, when not zero, starts the page after the fire time
	// the previous page ended on (fire times are unique per schedule, so
	// the fire time alone is the cursor).
	BeforeFireMs int64
}

// ScheduledTask is a task with the fire time it was fired for.
type ScheduledTask struct {
	Task
	FireTimeMs int64
}

// scheduleTaskColumns are listTaskColumns of the joined tasks table.
var scheduleTaskColumns = qualifyColumns("t.", listTaskColumns)

// qualifyColumns prefixes each column of cols (not the NULL placeholders)
// so that a join with tables sharing column names (id, created_at) reads
// the tasks' own.
func qualifyColumns(prefix, cols string) string {
	parts := strings.Split(cols, ",")
	for i, c := range parts {
		c = strings.TrimSpace(c)
		if c != "NULL" {
			c = prefix + c
		}
		parts[i] = c
	}
	return strings.Join(parts, ", ")
}

// scheduleTasksSQL reads the schedule's row by its unique name, then its
// fires in primary-key order, (schedule_id, fire_time) backwards, joining
// each fire's task by primary key: a page costs Limit fires however many
// the schedule has. Fires passed over by the overlap policy (no task) are
// left out. A deleted schedule has no row, so its fires (which outlive it
// to answer a task's origin) are not listed by name.
func scheduleTasksSQL(p ScheduleTasksParams) (string, []any) {
	q := `SELECT ` + scheduleTaskColumns + `, f.fire_time
		FROM schedules s FORCE INDEX (uk_schedules_name)
		JOIN schedule_fires f FORCE INDEX (PRIMARY) ON f.schedule_id = s.id
		JOIN tasks t FORCE INDEX (PRIMARY) ON t.id = f.task_id
		WHERE s.name = ?`
	args := []any{p.Schedule}
	if p.BeforeFireMs != 0 {
		q += ` AND f.fire_time < ?`
		args = append(args, p.BeforeFireMs)
	}
	q += ` ORDER BY f.fire_time DESC LIMIT ?`
	return q, append(args, p.Limit)
}

// ListScheduleTasks returns a page of the tasks schedule p.Schedule fired,
// latest fire time first; none for an unknown schedule.
func (s *Store) ListScheduleTasks(ctx context.Context, p ScheduleTasksParams) ([]ScheduledTask, error) {
	q, args := scheduleTasksSQL(p)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks of schedule %q: %w", p.Schedule, err)
	}
	defer rows.Close()
	var out []ScheduledTask
	for rows.Next() {
		var fire int64
		t, err := scanTask(fireScanner{rows, &fire})
		if err != nil {
			return nil, fmt.Errorf("list tasks of schedule %q: %w", p.Schedule, err)
		}
		out = append(out, ScheduledTask{Task: *t, FireTimeMs: fire})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tasks of schedule %q: %w", p.Schedule, err)
	}
	return out, nil
}

// fireScanner hands scanTask the task's columns and keeps the trailing
// fire time for itself.
type fireScanner struct {
	r    rowScanner
	fire *int64
}

func (f fireScanner) Scan(dest ...any) error { return f.r.Scan(append(dest, f.fire)...) }

// ExplainScheduleTasks is ExplainListTasks for ListScheduleTasks: one row
// per table the join reads.
func (s *Store) ExplainScheduleTasks(ctx context.Context, p ScheduleTasksParams) ([]map[string]string, error) {
	q, args := scheduleTasksSQL(p)
	return s.explain(ctx, q, args)
}
