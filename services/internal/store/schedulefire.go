package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/tracing"
)

// PlannedFire is one fire time a timer fires.
type PlannedFire struct {
	FireMs int64
	// Task is the task to create; nil passes the fire time over without
	// recording it (the template's type is gone).
	Task *NewTask
}

// FirePlan is what a timer does with one due schedule.
type FirePlan struct {
	// Fires are the fire times to fire, oldest first; empty only advances
	// the schedule (missed fire times the catch-up policy passes over).
	Fires []PlannedFire
	// NextMs is the schedule's next fire time afterwards.
	NextMs int64
	// SkipWhileRunning passes over a fire time, recording it without a
	// task, while the previous fire's task is not final (overlap skip).
	SkipWhileRunning bool
}

// FireOutcome is what became of one planned fire.
type FireOutcome struct {
	ScheduleID int64
	Schedule   string
	FireMs     int64
	FiredAtMs  int64
	// TaskID is the created task, 0 when none was.
	TaskID int64
	// Overlapped: passed over while the previous fire's task ran.
	Overlapped bool
	// Lost: the fire time had a fire already (another timer's); nothing
	// was written for it.
	Lost bool

	task *NewTask
}

// FireDueParams selects the schedules FireDue takes.
type FireDueParams struct {
	// NowMs is the scheduler clock's reading: schedules due by it are taken.
	NowMs int64
	// Limit bounds the schedules of one transaction.
	Limit int
	// FiredAt reads the scheduler clock once the schedules are locked; it
	// is recorded as each fire's fired_at.
	FiredAt func() int64
}

// FireDue fires due schedules in one transaction. It locks up to Limit
// unpaused schedules due by NowMs, skipping those another timer holds
// (FOR UPDATE SKIP LOCKED), asks plan what to fire for each, and writes it
// all: a schedule_fires row per fire time, the tasks with their history
// rows, and each schedule's next and last fire. A schedule plan refuses
// (error) is left as it is, still due.
//
// The primary key (schedule_id, fire_time) of schedule_fires is the
// arbiter of "one task per fire time": a fire time that has a row already
// keeps it, and the task planned for it is not written (Lost), whatever
// the locks decided. A snowflake collision fails the call with ErrIDTaken
// and writes nothing; so may a deadlock (IsDeadlock): retry either.
func (s *Store) FireDue(ctx context.Context, p FireDueParams, plan func(*Schedule) (FirePlan, error)) (taken int, out []FireOutcome, err error) {
	at, began := s.now().UTC(), time.Now()
	var fired []NewTask
	// READ COMMITTED: the locking read takes no gap locks, so timers
	// firing at once skip each other's rows instead of deadlocking on the
	// index entries their updates move.
	err = s.inTxOpts(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, func(tx *sql.Tx) error {
		out, fired = nil, nil
		scheds, err := lockDueSchedules(ctx, tx, p.NowMs, p.Limit)
		if err != nil {
			return err
		}
		taken = len(scheds)
		var (
			planned []Schedule
			plans   []FirePlan
		)
		firedAt := p.FiredAt()
		for i := range scheds {
			fp, err := plan(&scheds[i])
			// A fire time after the clock's reading (it was re-synced
			// backwards) waits for a later pass: nothing fires early.
			if err == nil && !slices.ContainsFunc(fp.Fires, func(f PlannedFire) bool { return f.FireMs > firedAt }) {
				planned, plans = append(planned, scheds[i]), append(plans, fp)
			}
		}
		if len(planned) == 0 {
			return nil
		}
		running, err := unfinishedTasks(ctx, tx, planned, plans)
		if err != nil {
			return err
		}
		out = decideFires(planned, plans, running, firedAt)
		tasks, err := recordFires(ctx, tx, out)
		if err != nil {
			return err
		}
		if len(tasks) > 0 {
			if _, err := insertTaskRows(ctx, tx, tasks, at); err != nil {
				return err
			}
			created := make(map[int64]bool, len(tasks))
			for _, t := range tasks {
				created[t.ID] = true
			}
			if _, err := recordMany(ctx, tx, s.creationRecords(tasks, created, at)); err != nil {
				return err
			}
			fired = tasks
		}
		return advanceSchedules(ctx, tx, planned, plans, out)
	})
	if err != nil {
		return 0, nil, fmt.Errorf("fire due schedules: %w", err)
	}
	if tracing.Enabled() && len(fired) > 0 {
		// Every fired task was created (one per fire, none deduplicated).
		s.traceCreations(ctx, fired, make([]BatchResult, len(fired)), began)
	}
	for _, o := range out {
		if o.TaskID != 0 {
			s.notify()
			break
		}
	}
	return taken, out, nil
}

func lockDueSchedules(ctx context.Context, tx *sql.Tx, nowMs int64, limit int) ([]Schedule, error) {
	return querySchedules(ctx, tx, `SELECT `+scheduleColumns+` FROM schedules
		WHERE paused = FALSE AND next_fire_time <= ? ORDER BY next_fire_time LIMIT ? FOR UPDATE SKIP LOCKED`, nowMs, limit)
}

// unfinishedTasks returns which of the last fires' tasks of overlap-skip
// schedules exist and are not final (a task pruned by retention had
// finished).
func unfinishedTasks(ctx context.Context, tx *sql.Tx, scheds []Schedule, plans []FirePlan) (map[int64]bool, error) {
	var ids []any
	for i, sc := range scheds {
		if plans[i].SkipWhileRunning && sc.LastTaskID != 0 {
			ids = append(ids, sc.LastTaskID)
		}
	}
	running := map[int64]bool{}
	if len(ids) == 0 {
		return running, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT id, status FROM tasks WHERE id IN (?`+strings.Repeat(",?", len(ids)-1)+`)`, ids...)
	if err != nil {
		return nil, fmt.Errorf("status of the last fires' tasks: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			id     int64
			status string
		)
		if err := rows.Scan(&id, &status); err != nil {
			return nil, fmt.Errorf("status of the last fires' tasks: %w", err)
		}
		running[id] = !contracts.Status(status).Terminal()
	}
	return running, rows.Err()
}

// decideFires turns the plans into outcomes: a fire time whose schedule
// skips overlaps is passed over while the previous fire's task (stored, or
// fired earlier in this plan) is not final.
func decideFires(scheds []Schedule, plans []FirePlan, running map[int64]bool, firedAt int64) []FireOutcome {
	var out []FireOutcome
	for i, sc := range scheds {
		busy := running[sc.LastTaskID]
		for _, f := range plans[i].Fires {
			if f.Task == nil {
				continue
			}
			o := FireOutcome{Schedule: sc.Name, FireMs: f.FireMs, FiredAtMs: firedAt, ScheduleID: sc.ID}
			if plans[i].SkipWhileRunning && busy {
				o.Overlapped = true
			} else {
				o.TaskID, o.task = f.Task.ID, f.Task
				busy = true
			}
			out = append(out, o)
		}
	}
	return out
}

// recordFires inserts a schedule_fires row per outcome; a fire time that
// has one already keeps it, and its outcome becomes Lost. It returns the
// tasks to create: those whose row went in.
func recordFires(ctx context.Context, tx *sql.Tx, out []FireOutcome) ([]NewTask, error) {
	if len(out) == 0 {
		return nil, nil
	}
	rows := make([][]any, len(out))
	var mine []any
	for i, o := range out {
		var task any
		if o.TaskID != 0 {
			task = o.TaskID
			mine = append(mine, o.TaskID)
		}
		rows[i] = []any{o.ScheduleID, o.FireMs, o.Schedule, task, o.FiredAtMs}
	}
	if err := insertRows(ctx, tx, `INSERT INTO schedule_fires (schedule_id, fire_time, schedule_name, task_id, fired_at) VALUES `,
		` ON DUPLICATE KEY UPDATE schedule_id = schedule_id`, rows); err != nil {
		return nil, fmt.Errorf("record fires: %w", err)
	}
	kept := map[int64]bool{}
	if len(mine) > 0 {
		got, err := tx.QueryContext(ctx, `SELECT task_id FROM schedule_fires WHERE task_id IN (?`+strings.Repeat(",?", len(mine)-1)+`)`, mine...)
		if err != nil {
			return nil, fmt.Errorf("read back fires: %w", err)
		}
		defer got.Close()
		for got.Next() {
			var id int64
			if err := got.Scan(&id); err != nil {
				return nil, fmt.Errorf("read back fires: %w", err)
			}
			kept[id] = true
		}
		if err := got.Err(); err != nil {
			return nil, fmt.Errorf("read back fires: %w", err)
		}
	}
	return keptTasks(out, kept), nil
}

// keptTasks marks the outcomes whose fire time had a row already as Lost
// and returns the tasks of the others.
func keptTasks(out []FireOutcome, kept map[int64]bool) []NewTask {
	var tasks []NewTask
	for i := range out {
		o := &out[i]
		switch {
		case o.task == nil:
		case kept[o.TaskID]:
			tasks = append(tasks, *o.task)
		default:
			o.Lost, o.TaskID = true, 0
		}
		o.task = nil
	}
	return tasks
}

// advanceSchedules moves every planned schedule to its next fire time and
// records its latest fire and task, in one statement.
func advanceSchedules(ctx context.Context, tx *sql.Tx, scheds []Schedule, plans []FirePlan, out []FireOutcome) error {
	lastFire, lastTask := map[int64]int64{}, map[int64]int64{}
	for _, o := range out {
		if o.Lost {
			continue
		}
		lastFire[o.ScheduleID] = max(lastFire[o.ScheduleID], o.FireMs)
		if o.TaskID != 0 {
			lastTask[o.ScheduleID] = o.TaskID
		}
	}
	var next, fire, task, in strings.Builder
	var nextArgs, fireArgs, taskArgs, inArgs []any
	for i, sc := range scheds {
		next.WriteString(" WHEN ? THEN ?")
		nextArgs = append(nextArgs, sc.ID, plans[i].NextMs)
		if f, ok := lastFire[sc.ID]; ok {
			fire.WriteString(" WHEN ? THEN ?")
			fireArgs = append(fireArgs, sc.ID, f)
		}
		if t, ok := lastTask[sc.ID]; ok {
			task.WriteString(" WHEN ? THEN ?")
			taskArgs = append(taskArgs, sc.ID, t)
		}
		if i > 0 {
			in.WriteString(",")
		}
		in.WriteString("?")
		inArgs = append(inArgs, sc.ID)
	}
	q := `UPDATE schedules SET next_fire_time = CASE id` + next.String() + ` END`
	args := nextArgs
	if fire.Len() > 0 {
		q += `, last_fire_time = CASE id` + fire.String() + ` ELSE last_fire_time END`
		args = append(args, fireArgs...)
	}
	if task.Len() > 0 {
		q += `, last_task_id = CASE id` + task.String() + ` ELSE last_task_id END`
		args = append(args, taskArgs...)
	}
	q += ` WHERE id IN (` + in.String() + `)`
	if _, err := tx.ExecContext(ctx, q, append(args, inArgs...)...); err != nil {
		return fmt.Errorf("advance schedules: %w", err)
	}
	return nil
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
