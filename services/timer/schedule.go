package timer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/schedule"
	"github.com/axsched/ax/services/internal/store"
)

// Defaults of the schedule settings in Config.
const (
	SchedulePollDefault    = 500 * time.Millisecond
	ScheduleGraceDefault   = 5 * time.Second
	ScheduleWorkersDefault = 8
	// scheduleBatch bounds the due schedules one pass reads.
	scheduleBatch = 1000
	// scheduleMinSleep keeps a pass that found a schedule held by another
	// timer from spinning while that timer commits.
	scheduleMinSleep = 5 * time.Millisecond
)

// fireLoop fires schedules until ctx ends. Every timer replica runs it;
// see doc.go for why they fire each fire time once between them.
func (t *Timer) fireLoop(ctx context.Context) error {
	wait := time.NewTimer(0)
	defer wait.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wait.C:
		}
		sleep, err := t.FireSchedules(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			t.logger.Warn("schedule pass failed", "err", err)
			sleep = t.cfg.SchedulePoll
		}
		wait.Reset(sleep)
	}
}

// FireSchedules fires every schedule whose next fire time has come on the
// scheduler clock, and returns how long to sleep: until the earliest next
// fire time, or SchedulePoll (which bounds how late a new or changed
// schedule's first fire is seen), whichever is sooner.
func (t *Timer) FireSchedules(ctx context.Context) (time.Duration, error) {
	now := t.cfg.Clock.Now()
	due, err := t.store.DueSchedules(ctx, now.UnixMilli(), scheduleBatch)
	if err != nil {
		return 0, err
	}
	// Replicas read the same due schedules; in their own orders they mostly
	// take different ones (the row lock skips those another holds).
	rand.Shuffle(len(due), func(i, j int) { due[i], due[j] = due[j], due[i] })
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(t.cfg.ScheduleWorkers)
	for i := range due {
		g.Go(func() error {
			t.fireSchedule(gctx, &due[i], now)
			return nil
		})
	}
	_ = g.Wait()
	if len(due) == scheduleBatch {
		return 0, nil
	}
	next, ok, err := t.store.NextScheduleFire(ctx)
	if err != nil || !ok {
		return t.cfg.SchedulePoll, err
	}
	sleep := time.UnixMilli(next).Sub(t.cfg.Clock.Now())
	return min(max(sleep, scheduleMinSleep), t.cfg.SchedulePoll), nil
}

// fireSchedule takes a due schedule through its plan, one transaction per
// step; it stops at the first step another timer took first. Errors are
// logged: the schedule stays due and the next pass tries again.
func (t *Timer) fireSchedule(ctx context.Context, sc *store.Schedule, now time.Time) {
	spec, err := schedule.Parse(sc.Cron, sc.TimeZone, now)
	if err != nil {
		t.logger.Error("schedule cannot be parsed; not firing it", "schedule", sc.Name, "err", err)
		return
	}
	plan := spec.Plan(time.UnixMilli(sc.NextFireMs), now, schedule.CatchUp(sc.CatchUp), sc.CatchUpLimit, t.cfg.ScheduleGrace)
	if plan.Next.IsZero() {
		t.logger.Error("schedule has no next fire time; not firing it", "schedule", sc.Name)
		return
	}
	if plan.Missed > 0 {
		metrics.ScheduleFires.WithLabelValues("missed").Add(float64(plan.Missed))
		t.logger.Info("schedule missed fire times", "schedule", sc.Name, "missed", plan.Missed, "catch_up", sc.CatchUp, "firing", len(plan.Fire))
	}
	expect := sc.NextFireMs
	if len(plan.Fire) == 0 {
		t.step(ctx, store.Fire{ScheduleID: sc.ID, Name: sc.Name, ExpectNextMs: expect, NextMs: plan.Next.UnixMilli()}, sc)
		return
	}
	for i, ft := range plan.Fire {
		next := plan.Next
		if i+1 < len(plan.Fire) {
			next = plan.Fire[i+1]
		}
		f := store.Fire{ScheduleID: sc.ID, Name: sc.Name, ExpectNextMs: expect, NextMs: next.UnixMilli(),
			FireMs: ft.UnixMilli(), SkipWhileRunning: schedule.Overlap(sc.Overlap) == schedule.OverlapSkip}
		if !t.step(ctx, f, sc) {
			return
		}
		expect = f.NextMs
	}
}

// step commits one step of a schedule and reports whether the schedule is
// still this timer's to go on with.
func (t *Timer) step(ctx context.Context, f store.Fire, sc *store.Schedule) bool {
	var (
		out store.FireOutcome
		err error
	)
	for range 3 { // fresh task IDs on the rare snowflake collision
		if f.FireMs != 0 {
			f.Task, err = t.scheduledTask(ctx, sc, f.FireMs)
			switch {
			case errors.Is(err, store.ErrNotFound):
				// The type is gone: the fire time passes, the schedule
				// goes on (a type registered again fires again).
				metrics.ScheduleFires.WithLabelValues("refused").Inc()
				t.logger.Warn("schedule's task type is not registered; passing the fire time over", "schedule", sc.Name, "err", err)
			case err != nil:
				t.logger.Warn("schedule's task cannot be made now", "schedule", sc.Name, "err", err)
				return false
			}
		}
		// Checked by the caller's plan, read again here: a fire time is
		// never fired before the scheduler clock has reached it.
		f.FiredAtMs = t.cfg.Clock.Now().UnixMilli()
		if f.Task != nil && f.FiredAtMs < f.FireMs {
			return false
		}
		if out, err = t.store.FireSchedule(ctx, f); !errors.Is(err, store.ErrIDTaken) {
			break
		}
	}
	switch {
	case errors.Is(err, store.ErrFired) || errors.Is(err, store.ErrScheduleMoved):
		metrics.ScheduleFires.WithLabelValues("lost").Inc()
		return false
	case err != nil:
		if ctx.Err() == nil {
			t.logger.Warn("schedule step failed", "schedule", sc.Name, "err", err)
		}
		return false
	case out.Overlapped:
		metrics.ScheduleFires.WithLabelValues("overlapped").Inc()
	case out.TaskID != 0:
		metrics.ScheduleFires.WithLabelValues("fired").Inc()
		metrics.ScheduleLateness.Observe(float64(t.cfg.Clock.Now().UnixMilli()-f.FireMs) / 1000)
	}
	return true
}

// scheduledTask is the task a schedule's template stands for at a fire
// time, with the type's current defaults for what the template leaves
// out. It is due at its fire time, which has come, so the relay dispatches
// it with its READY event.
func (t *Timer) scheduledTask(ctx context.Context, sc *store.Schedule, fireMs int64) (*store.NewTask, error) {
	tmpl := sc.Template
	tt, err := t.types.Get(ctx, tmpl.Type)
	if err != nil {
		return nil, fmt.Errorf("task type %s: %w", tmpl.Type, err)
	}
	nt := &store.NewTask{ID: t.cfg.IDs.Next(), Type: tmpl.Type, Priority: tt.Priority, Payload: tmpl.Payload,
		Status: contracts.StatusReady, NextRunTimeMs: fireMs, MaxRetries: tt.MaxRetries, TimeoutMs: tt.TimeoutMs,
		Reason: "fired by schedule " + sc.Name + " for " + time.UnixMilli(fireMs).UTC().Format(time.RFC3339Nano),
		Route:  events.RouteDispatch}
	if p, err := contracts.ParsePriority(tmpl.Priority); err == nil && p != "" {
		nt.Priority = p
	}
	if tmpl.MaxRetries != nil {
		nt.MaxRetries = *tmpl.MaxRetries
	}
	if tmpl.Timeout != "" {
		d, err := contracts.ParseTypeDuration("timeout", tmpl.Timeout)
		if err != nil {
			return nil, err
		}
		nt.TimeoutMs = d.Milliseconds()
	}
	return nt, nil
}
