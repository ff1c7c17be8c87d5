package timer

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/idgen"
	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/schedule"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// firer is a timer replica that only fires schedules, with a store
// (connection pool) of its own, as a separate process would have.
func firer(t *testing.T, dsn string, node int64, clk clock.Clock, grace time.Duration) *Timer {
	t.Helper()
	st, err := store.Open(context.Background(), dsn, store.Options{Actor: "timer@test"})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	ids, err := idgen.New(node)
	require.NoError(t, err)
	return New(Config{IDs: ids, Clock: clk, ScheduleGrace: grace}, st, nil, keys.Keys{}, nil, testenv.Logger(t))
}

func createSchedule(t *testing.T, st *store.Store, name, expr, overlap, catchUp string, next time.Time) *store.Schedule {
	t.Helper()
	sc, err := st.CreateSchedule(context.Background(), store.Schedule{Name: name, Cron: expr, TimeZone: "UTC",
		Template: contracts.TaskTemplate{Type: "ax.noop", Payload: []byte(`{"from":"` + name + `"}`)},
		Overlap:  overlap, CatchUp: catchUp, CatchUpLimit: 100, NextFireMs: next.UnixMilli()})
	require.NoError(t, err)
	return sc
}

func fires(t *testing.T, st *store.Store, sc *store.Schedule) []store.ScheduleFireRow {
	t.Helper()
	rows, err := st.ScheduleFires(context.Background(), sc.ID)
	require.NoError(t, err)
	return rows
}

// soakDuration is how long TestSchedulesFireOncePerFireTimeWithThreeTimers
// runs: a minute by default, AX_SCHEDULE_SOAK (a Go duration, e.g. 3m) for
// the longer proof.
func soakDuration(t *testing.T) time.Duration {
	if v := os.Getenv("AX_SCHEDULE_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "AX_SCHEDULE_SOAK")
		return d
	}
	if testing.Short() {
		return 10 * time.Second
	}
	return time.Minute
}

// TestSchedulesFireOncePerFireTimeWithThreeTimers runs three timer replicas
// on one database, each with its own pool and its own Redis clock, under a
// schedule that fires every second: every fire time in the run has exactly
// one task, none was fired before its fire time, and none was skipped. A
// second schedule with overlap skip never fires again while its first task
// waits (no executor runs it); a third is paused and resumed mid-run.
func TestSchedulesFireOncePerFireTimeWithThreeTimers(t *testing.T) {
	st, dsn := testenv.Store(t)
	rdb, _ := testenv.Redis(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, st.RegisterType(ctx, store.TaskType{Name: "ax.noop", TimeoutMs: 1000, MaxRetries: 1}))
	spec, err := schedule.Parse("* * * * * *", "", time.Now())
	require.NoError(t, err)
	start := spec.Next(time.Now().Add(time.Second))
	// catch_up all: a fire a loaded machine finds late is still fired.
	every := createSchedule(t, st, "every-second", "* * * * * *", "allow", "all", start)
	overlap := createSchedule(t, st, "overlap-skip", "* * * * * *", "skip", "skip", start)
	paused := createSchedule(t, st, "paused", "* * * * * *", "allow", "skip", start)

	var wg sync.WaitGroup
	for node := range int64(3) {
		clk := clock.NewRedis(rdb, nil, testenv.Logger(t))
		require.NoError(t, clk.Sync(ctx))
		tm := firer(t, dsn, node+1, clk, ScheduleGraceDefault)
		wg.Add(2)
		go func() { defer wg.Done(); _ = clk.Run(ctx, time.Second) }()
		go func() { defer wg.Done(); _ = tm.fireLoop(ctx) }()
	}
	run := soakDuration(t)
	time.Sleep(run / 2)
	_, err = st.PauseSchedule(ctx, "paused", true, 0)
	require.NoError(t, err)
	pausedAt := time.Now()
	time.Sleep(3 * time.Second)
	resumeAt := time.Now()
	_, err = st.PauseSchedule(ctx, "paused", false, spec.Next(resumeAt).UnixMilli())
	require.NoError(t, err)
	time.Sleep(run/2 - 3*time.Second)
	cancel()
	wg.Wait()
	ctx = context.Background()

	got := fires(t, st, every)
	require.GreaterOrEqual(t, len(got), int(run/time.Second)-3)
	var lateness []int64
	for i, f := range got {
		require.Equal(t, start.UnixMilli()+int64(i)*1000, f.FireMs, "fire %d: every second, each once, none left out", i)
		require.GreaterOrEqual(t, f.FiredAtMs, f.FireMs, "fire %d fired early", i)
		require.NotZero(t, f.TaskID)
		origin, err := st.TaskOrigin(ctx, f.TaskID)
		require.NoError(t, err)
		require.Equal(t, &contracts.TaskOrigin{Schedule: "every-second", FireTime: time.UnixMilli(f.FireMs).UTC()}, origin)
		lateness = append(lateness, f.FiredAtMs-f.FireMs)
	}
	tasks := testenv.Column[int](t, st.DB(), `SELECT COUNT(*) FROM tasks t JOIN schedule_fires f ON f.task_id = t.id WHERE f.schedule_id = ?`, every.ID)
	require.Equal(t, []int{len(got)}, tasks, "one task per fire")
	slices.Sort(lateness)
	t.Logf("%d fires by 3 timers; lateness p50 %d ms, p99 %d ms, max %d ms", len(got),
		lateness[len(lateness)/2], lateness[len(lateness)*99/100], lateness[len(lateness)-1])

	ov := fires(t, st, overlap)
	require.GreaterOrEqual(t, len(ov), len(got)-1, "overlap skip records every fire time too")
	require.NotZero(t, ov[0].TaskID, "the first fire makes a task")
	for _, f := range ov[1:] {
		require.Zero(t, f.TaskID, "fire time %d passed over while the first task waits", f.FireMs)
	}

	for _, f := range fires(t, st, paused) {
		fired := time.UnixMilli(f.FiredAtMs)
		require.False(t, fired.After(pausedAt.Add(time.Second)) && fired.Before(resumeAt), "fired at %s while paused", fired)
		require.NotZero(t, f.TaskID)
	}
}

// TestScheduleCatchUpPolicies stops the only timer across fire times (a
// new replica then starts from what MySQL says, as after kill -9) and
// checks what each policy fires for the fire times nobody fired. The clock
// is skipped ahead instead of waited out; the schedule fires every 2 s and
// the timer returns 1.2 s after a fire time, beyond its 500 ms grace, so the
// latest fire time is missed too.
func TestScheduleCatchUpPolicies(t *testing.T) {
	st, dsn := testenv.Store(t)
	ctx := context.Background()
	require.NoError(t, st.RegisterType(ctx, store.TaskType{Name: "ax.noop", TimeoutMs: 1000, MaxRetries: 1}))
	clk := &testenv.Clock{}
	spec, err := schedule.Parse("*/2 * * * * *", "", clk.Now())
	require.NoError(t, err)
	first := spec.Next(clk.Now())
	policies := []string{"skip", "last", "all"}
	scheds := map[string]*store.Schedule{}
	for _, p := range policies {
		scheds[p] = createSchedule(t, st, "catch-up-"+p, "*/2 * * * * *", "allow", p, first)
	}
	grace := 500 * time.Millisecond
	clk.Skip(first.Sub(clk.Now()))
	_, err = firer(t, dsn, 1, clk, grace).FireSchedules(ctx) // fires `first` on time
	require.NoError(t, err)

	// The timer is gone for five fire times and returns 1.2 s after the
	// sixth.
	clk.Skip(first.Add(12*time.Second + 1200*time.Millisecond).Sub(clk.Now()))
	_, err = firer(t, dsn, 2, clk, grace).FireSchedules(ctx)
	require.NoError(t, err)

	at := func(n int) int64 { return first.Add(time.Duration(n) * 2 * time.Second).UnixMilli() }
	want := map[string][]int64{
		"skip": {at(0)},
		"last": {at(0), at(6)},
		"all":  {at(0), at(1), at(2), at(3), at(4), at(5), at(6)},
	}
	for _, p := range policies {
		var times []int64
		for _, f := range fires(t, st, scheds[p]) {
			require.NotZero(t, f.TaskID)
			require.GreaterOrEqual(t, f.FiredAtMs, f.FireMs)
			times = append(times, f.FireMs)
		}
		require.Equal(t, want[p], times, "catch_up %s", p)
		sc, err := st.GetSchedule(ctx, "catch-up-"+p)
		require.NoError(t, err)
		require.Equal(t, at(7), sc.NextFireMs, "catch_up %s resumes at the next fire time", p)
	}
}

// TestScheduleNeverFiresEarly asks a timer to fire a schedule just before
// its fire time: nothing fires, and the pass sleeps until the fire time.
func TestScheduleNeverFiresEarly(t *testing.T) {
	st, dsn := testenv.Store(t)
	ctx := context.Background()
	require.NoError(t, st.RegisterType(ctx, store.TaskType{Name: "ax.noop", TimeoutMs: 1000}))
	clk := &testenv.Clock{}
	next := clk.Now().Truncate(time.Second).Add(10 * time.Second)
	sc := createSchedule(t, st, "not-yet", "* * * * * *", "allow", "skip", next)
	tm := firer(t, dsn, 1, clk, time.Second)
	clk.Skip(next.Add(-300 * time.Millisecond).Sub(clk.Now()))
	sleep, err := tm.FireSchedules(ctx)
	require.NoError(t, err)
	require.Empty(t, fires(t, st, sc))
	require.LessOrEqual(t, sleep, 300*time.Millisecond, "the pass sleeps until the fire time, not a poll interval")
	time.Sleep(sleep)
	for {
		_, err := tm.FireSchedules(ctx)
		require.NoError(t, err)
		if got := fires(t, st, sc); len(got) > 0 {
			require.Len(t, got, 1)
			require.GreaterOrEqual(t, got[0].FiredAtMs, next.UnixMilli(), "fired early")
			return
		}
		require.True(t, clk.Now().Before(next.Add(time.Second)), "not fired a second after its fire time")
		time.Sleep(time.Millisecond)
	}
}

// TestScheduleDSTEuropeBerlin fires a daily 02:30 schedule in
// Europe/Berlin through the timer across both changes of 2027, with the
// timer's clock skipped ahead: on 28 March 02:30 does not exist and fires
// once, at 03:00 CEST; on 31 October 02:30 happens twice and fires once,
// at its first occurrence (CEST).
func TestScheduleDSTEuropeBerlin(t *testing.T) {
	st, dsn := testenv.Store(t)
	ctx := context.Background()
	require.NoError(t, st.RegisterType(ctx, store.TaskType{Name: "ax.noop", TimeoutMs: 1000}))
	clk := &testenv.Clock{}
	skipTo := func(at time.Time) { clk.Skip(at.Sub(clk.Now())) }
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	skipTo(utc("2027-03-27T12:00:00Z"))
	spec, err := schedule.Parse("30 2 * * *", "Europe/Berlin", clk.Now())
	require.NoError(t, err)
	sc, err := st.CreateSchedule(ctx, store.Schedule{Name: "nightly", Cron: "30 2 * * *", TimeZone: "Europe/Berlin",
		Template: contracts.TaskTemplate{Type: "ax.noop"}, Overlap: "allow", CatchUp: "skip", CatchUpLimit: 100,
		NextFireMs: spec.Next(clk.Now()).UnixMilli()})
	require.NoError(t, err)
	require.Equal(t, utc("2027-03-28T01:00:00Z").UnixMilli(), sc.NextFireMs, "03:00 CEST, the first instant after the gap")
	tm := firer(t, dsn, 1, clk, time.Second)
	pass := func(at time.Time) {
		skipTo(at)
		_, err := tm.FireSchedules(ctx)
		require.NoError(t, err)
	}
	fired := func() []string {
		var out []string
		for _, f := range fires(t, st, sc) {
			out = append(out, time.UnixMilli(f.FireMs).UTC().Format(time.RFC3339))
		}
		return out
	}
	pass(utc("2027-03-28T00:59:59.500Z"))
	require.Empty(t, fired(), "not before 03:00 CEST")
	pass(utc("2027-03-28T01:00:00.010Z"))
	pass(utc("2027-03-29T00:30:00.010Z"))
	require.Equal(t, []string{"2027-03-28T01:00:00Z", "2027-03-29T00:30:00Z"}, fired())

	pass(utc("2027-10-30T12:00:00Z")) // months away: the missed days are skipped
	pass(utc("2027-10-31T00:30:00.010Z"))
	pass(utc("2027-10-31T01:30:00.010Z")) // 02:30 CET, the second 02:30
	pass(utc("2027-11-01T01:30:00.010Z"))
	require.Equal(t, []string{"2027-03-28T01:00:00Z", "2027-03-29T00:30:00Z", "2027-10-31T00:30:00Z", "2027-11-01T01:30:00Z"}, fired())
}

// TestPassWithNothingDueOpensNoTransaction: a pass reads the earliest fire
// time first and opens the schedule transactions only when something is
// due (it opened ScheduleWorkers of them every pass, schedules or none).
func TestPassWithNothingDueOpensNoTransaction(t *testing.T) {
	st, dsn := testenv.Store(t)
	ctx := context.Background()
	require.NoError(t, st.RegisterType(ctx, store.TaskType{Name: "ax.noop", TimeoutMs: 1000}))
	clk := &testenv.Clock{}
	tm := firer(t, dsn, 1, clk, time.Second)

	sleep, err := tm.FireSchedules(ctx)
	require.NoError(t, err)
	require.Equal(t, tm.cfg.SchedulePoll, sleep, "no schedule: sleep a poll interval")
	require.Zero(t, tm.fireTxs.Load(), "no schedule, no transaction")

	next := clk.Now().Truncate(time.Second).Add(10 * time.Second)
	sc := createSchedule(t, st, "later", "* * * * * *", "allow", "skip", next)
	sleep, err = tm.FireSchedules(ctx)
	require.NoError(t, err)
	require.Zero(t, tm.fireTxs.Load(), "nothing due, no transaction")
	require.LessOrEqual(t, sleep, tm.cfg.SchedulePoll)

	clk.Skip(next.Sub(clk.Now()))
	_, err = tm.FireSchedules(ctx)
	require.NoError(t, err)
	require.Len(t, fires(t, st, sc), 1, "fired once due")
	require.EqualValues(t, tm.cfg.ScheduleWorkers, tm.fireTxs.Load(), "a due pass runs every worker")
}
