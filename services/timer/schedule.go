package timer

import (
	"context"
	"errors"
	"fmt"
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
	// scheduleBatch bounds the schedules one transaction fires.
	scheduleBatch = 200
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
// scheduler clock and returns how long to sleep: until the earliest next
// fire time, or SchedulePoll (which bounds how late a new or changed
// schedule's first fire is seen), whichever is sooner. ScheduleWorkers
// transactions run at once, each on up to scheduleBatch schedules that
// the others do not hold.
func (t *Timer) FireSchedules(ctx context.Context) (time.Duration, error) {
	now := t.cfg.Clock.Now()
	// One read tells whether anything is due: without it every pass
	// opened ScheduleWorkers transactions, four statements each, twice a
	// second with no schedule at all.
	if next, ok, err := t.store.NextScheduleFire(ctx); err != nil || !ok || next > now.UnixMilli() {
		return t.sleepUntil(next, ok), err
	}
	g, gctx := errgroup.WithContext(ctx)
	for range t.cfg.ScheduleWorkers {
		g.Go(func() error {
			for {
				taken, err := t.fireBatch(gctx, now)
				if err != nil || taken < scheduleBatch {
					return err
				}
			}
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	next, ok, err := t.store.NextScheduleFire(ctx)
	return t.sleepUntil(next, ok), err
}

// sleepUntil is how long to sleep before the next pass when the earliest
// fire time is nextMs (ok false: no schedule), bounded by SchedulePoll.
func (t *Timer) sleepUntil(nextMs int64, ok bool) time.Duration {
	if !ok {
		return t.cfg.SchedulePoll
	}
	sleep := time.UnixMilli(nextMs).Sub(t.cfg.Clock.Now())
	return min(max(sleep, scheduleMinSleep), t.cfg.SchedulePoll)
}

// fireBatch fires one transaction's worth of due schedules, retrying
// with fresh task IDs on a snowflake collision and on a deadlock.
func (t *Timer) fireBatch(ctx context.Context, now time.Time) (int, error) {
	for attempt := 1; ; attempt++ {
		t.fireTxs.Add(1)
		taken, out, err := t.store.FireDue(ctx, store.FireDueParams{NowMs: now.UnixMilli(), Limit: scheduleBatch,
			FiredAt: func() int64 { return t.cfg.Clock.Now().UnixMilli() }},
			func(sc *store.Schedule) (store.FirePlan, error) { return t.planFires(ctx, sc, now) })
		if (errors.Is(err, store.ErrIDTaken) || store.IsDeadlock(err)) && attempt < 3 {
			continue
		}
		if err != nil {
			return 0, err
		}
		t.countFires(out)
		return taken, nil
	}
}

// countFires feeds the metrics with what a transaction committed.
func (t *Timer) countFires(out []store.FireOutcome) {
	for _, o := range out {
		switch {
		case o.Lost:
			metrics.ScheduleFires.WithLabelValues("lost").Inc()
		case o.Overlapped:
			metrics.ScheduleFires.WithLabelValues("overlapped").Inc()
		default:
			metrics.ScheduleFires.WithLabelValues("fired").Inc()
			metrics.ScheduleLateness.Observe(float64(t.cfg.Clock.Now().UnixMilli()-o.FireMs) / 1000)
		}
	}
}

// planFires decides what a locked due schedule fires: its catch-up plan
// and a task for each fire time. An error leaves the schedule due for a
// later pass (its type's settings cannot be read now).
func (t *Timer) planFires(ctx context.Context, sc *store.Schedule, now time.Time) (store.FirePlan, error) {
	spec, err := schedule.Parse(sc.Cron, sc.TimeZone, now)
	if err != nil {
		t.logger.Error("schedule cannot be parsed; not firing it", "schedule", sc.Name, "err", err)
		return store.FirePlan{}, err
	}
	plan := spec.Plan(time.UnixMilli(sc.NextFireMs), now, schedule.CatchUp(sc.CatchUp), sc.CatchUpLimit, t.cfg.ScheduleGrace)
	if plan.Next.IsZero() {
		t.logger.Error("schedule has no next fire time; not firing it", "schedule", sc.Name)
		return store.FirePlan{}, schedule.ErrNeverFires
	}
	if plan.Missed > 0 {
		metrics.ScheduleFires.WithLabelValues("missed").Add(float64(plan.Missed))
		t.logger.Info("schedule missed fire times", "schedule", sc.Name, "missed", plan.Missed, "catch_up", sc.CatchUp, "firing", len(plan.Fire))
	}
	fp := store.FirePlan{NextMs: plan.Next.UnixMilli(), SkipWhileRunning: schedule.Overlap(sc.Overlap) == schedule.OverlapSkip}
	for _, ft := range plan.Fire {
		task, err := t.scheduledTask(ctx, sc, ft.UnixMilli())
		switch {
		case errors.Is(err, store.ErrNotFound):
			// The type is gone: the fire time passes, the schedule goes
			// on (a type registered again fires again).
			metrics.ScheduleFires.WithLabelValues("refused").Inc()
			t.logger.Warn("schedule's task type is not registered; passing the fire time over", "schedule", sc.Name, "err", err)
		case err != nil:
			return store.FirePlan{}, err
		}
		fp.Fires = append(fp.Fires, store.PlannedFire{FireMs: ft.UnixMilli(), Task: task})
	}
	return fp, nil
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
	nt.TraceParent = traceFire(sc.Name, nt)
	return nt, nil
}
