package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/axsched/ax/contracts"
)

// SchedulesNDefault is how many every-second schedules the schedules
// workload creates.
const SchedulesNDefault = 1000

// Schedules figures.
const (
	mFireLateness = "fire_lateness" // fire_lateness_p50_ms ...: fire time to the fire's commit
	mFires        = "fires"
	mFiresPerS    = "fires_per_s"
)

// scheduleSettle is how long after the window the harness waits before it
// reads the fires, so that the window's last fire times have committed.
const scheduleSettle = 3 * time.Second

// schedules measures firing: SchedulesN schedules of ax.bench firing every
// second, with the type paused so that the fired tasks wait READY and the
// CPU measured is the cost of firing (timer, MySQL, relay), not of running.
// Over the window it reads schedule_fires: how late each fire committed
// after its fire time (fired_at, on the scheduler clock), fires before
// their time (early_count) and fire times of the window not fired
// (missing).
func (r *run) schedules(ctx context.Context) (_ []Metric, err error) {
	prev, err := r.api.GetType(ctx, TypeBench)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", TypeBench, err)
	}
	if _, err := r.api.UpdateType(ctx, TypeBench, contracts.TaskTypeUpdate{Paused: new(true)}); err != nil {
		return nil, fmt.Errorf("pause %s: %w", TypeBench, err)
	}
	defer func() {
		_, rerr := r.api.UpdateType(context.WithoutCancel(ctx), TypeBench, contracts.TaskTypeUpdate{Paused: &prev.Paused})
		err = errors.Join(err, rerr)
	}()
	prefix := "bench-" + randomSuffix() + "-"
	n := r.cfg.SchedulesN
	defer func() {
		err = errors.Join(err, r.eachSchedule(context.WithoutCancel(ctx), prefix, n, r.deleteSchedule))
	}()
	if err := r.eachSchedule(ctx, prefix, n, r.createSchedule); err != nil {
		return nil, err
	}
	// Warm up, then measure whole seconds.
	from := time.Now().Truncate(time.Second).Add(2 * time.Second)
	time.Sleep(time.Until(from))
	r.startCosts()
	time.Sleep(r.cfg.Duration)
	to := time.Now()
	costs := r.meter.stop(0) // fires, not tasks
	time.Sleep(scheduleSettle)

	rows, err := r.db.QueryContext(ctx, `SELECT f.fire_time, f.fired_at FROM schedule_fires f
		WHERE f.schedule_name LIKE ? AND f.fire_time >= ? AND f.fire_time <= ?`, prefix+"%", from.UnixMilli(), to.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("read fires: %w", err)
	}
	defer rows.Close()
	var late []float64
	early := 0
	for rows.Next() {
		var fire, fired int64
		if err := rows.Scan(&fire, &fired); err != nil {
			return nil, fmt.Errorf("read fires: %w", err)
		}
		late = append(late, float64(fired-fire))
		if fired < fire {
			early++
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read fires: %w", err)
	}
	seconds := int(to.Sub(from)/time.Second) + 1 // fire times from..to, both ends in
	expected := n * seconds
	figures := latencyMetrics(mFireLateness, late, 50, 90, 99)
	figures = append(figures, Metric{Name: mFires, Value: float64(len(late))},
		Metric{Name: mFiresPerS, Value: float64(len(late)) / to.Sub(from).Seconds()},
		Metric{Name: mEarly, Value: float64(early)}, Metric{Name: mMissing, Value: float64(max(expected-len(late), 0))})
	r.logger.Info("schedules window done", "schedules", n, "fires", len(late), "expected", expected)
	return join(figures, costs), nil
}

// eachSchedule calls fn for the n schedules of the run, 16 at a time.
func (r *run) eachSchedule(ctx context.Context, prefix string, n int, fn func(context.Context, string) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error { return fn(gctx, prefix+strconv.Itoa(i)) })
	}
	return g.Wait()
}

func (r *run) createSchedule(ctx context.Context, name string) error {
	_, err := r.api.CreateSchedule(ctx, contracts.ScheduleRequest{Name: name, Cron: "* * * * * *",
		Task: contracts.TaskTemplate{Type: TypeBench}})
	return err
}

func (r *run) deleteSchedule(ctx context.Context, name string) error {
	return r.api.DeleteSchedule(ctx, name)
}
