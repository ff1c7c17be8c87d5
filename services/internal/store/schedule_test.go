package store_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

func newSchedule(t *testing.T, st *store.Store, name string, nextMs int64) *store.Schedule {
	t.Helper()
	sc, err := st.CreateSchedule(context.Background(), store.Schedule{
		Name: name, Cron: "* * * * * *", TimeZone: "UTC", Template: contracts.TaskTemplate{Type: "ax.noop"},
		Overlap: "allow", CatchUp: "skip", CatchUpLimit: 100, NextFireMs: nextMs,
	})
	require.NoError(t, err)
	return sc
}

func fireTask(id, fireMs int64) *store.NewTask {
	return &store.NewTask{ID: id, Type: "ax.noop", Priority: contracts.PriorityNormal, Status: contracts.StatusReady,
		NextRunTimeMs: fireMs, MaxRetries: 0, TimeoutMs: 1000, Reason: "fired"}
}

// fireOnce is a timer's plan in miniature: fire the schedule's next fire
// time (with a task named id) and move on a second.
func fireOnce(id int64, skipWhileRunning bool) func(*store.Schedule) (store.FirePlan, error) {
	return func(sc *store.Schedule) (store.FirePlan, error) {
		return store.FirePlan{Fires: []store.PlannedFire{{FireMs: sc.NextFireMs, Task: fireTask(id, sc.NextFireMs)}},
			NextMs: sc.NextFireMs + 1000, SkipWhileRunning: skipWhileRunning}, nil
	}
}

func fireDue(t *testing.T, st *store.Store, nowMs int64, plan func(*store.Schedule) (store.FirePlan, error)) []store.FireOutcome {
	t.Helper()
	_, out, err := st.FireDue(context.Background(), store.FireDueParams{NowMs: nowMs, Limit: 100,
		FiredAt: func() int64 { return nowMs }}, plan)
	require.NoError(t, err)
	return out
}

// TestFireDueOneTaskPerFireTime races 20 timers on one fire time: one
// creates the task, the others write nothing.
func TestFireDueOneTaskPerFireTime(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	const fireMs = 1_800_000_000_000
	sc := newSchedule(t, st, "race", fireMs)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins []int64
	)
	for i := range 20 {
		wg.Go(func() {
			_, out, err := st.FireDue(ctx, store.FireDueParams{NowMs: fireMs, Limit: 10, FiredAt: func() int64 { return fireMs }},
				fireOnce(int64(5000+i), false))
			if err != nil {
				t.Errorf("fire: %v", err)
				return
			}
			mu.Lock()
			for _, o := range out {
				if o.TaskID != 0 {
					wins = append(wins, o.TaskID)
				}
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Len(t, wins, 1)
	require.Equal(t, []int{1}, testenv.Column[int](t, st.DB(), `SELECT COUNT(*) FROM tasks`))
	origin, err := st.TaskOrigin(ctx, wins[0])
	require.NoError(t, err)
	require.Equal(t, &contracts.TaskOrigin{Schedule: "race", FireTime: time.UnixMilli(fireMs).UTC()}, origin)
	got, err := st.GetSchedule(ctx, "race")
	require.NoError(t, err)
	require.Equal(t, int64(fireMs+1000), got.NextFireMs)
	require.Equal(t, wins[0], got.LastTaskID)
	require.Equal(t, int64(fireMs), got.LastFireMs)
	require.Equal(t, sc.ID, got.ID)
}

// TestFireDueUniqueKeyIsTheArbiter fires a fire time again after the
// schedule's next fire time was set back (a confused replica or an
// operator might): the lock lets it through, the unique key does not, and
// no second task is written.
func TestFireDueUniqueKeyIsTheArbiter(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	const fireMs = 1_800_000_000_000
	sc := newSchedule(t, st, "again", fireMs)
	require.Equal(t, int64(7001), fireDue(t, st, fireMs, fireOnce(7001, false))[0].TaskID)
	_, err := st.DB().Exec(`UPDATE schedules SET next_fire_time = ? WHERE id = ?`, fireMs, sc.ID)
	require.NoError(t, err)
	out := fireDue(t, st, fireMs, fireOnce(7002, false))
	require.Equal(t, []store.FireOutcome{{ScheduleID: sc.ID, Schedule: "again", FireMs: fireMs, FiredAtMs: fireMs, Lost: true}}, out)
	require.Equal(t, []int64{7001}, testenv.Column[int64](t, st.DB(), `SELECT id FROM tasks`))
	require.Equal(t, []int{1}, testenv.Column[int](t, st.DB(), `SELECT COUNT(*) FROM task_history`))
	got, err := st.GetSchedule(ctx, "again")
	require.NoError(t, err)
	require.Equal(t, int64(7001), got.LastTaskID, "the fire time's task is still the first one")
	require.Equal(t, int64(fireMs+1000), got.NextFireMs, "the schedule moves on")
}

func TestFireDueOverlapSkip(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	const t0 = 1_800_000_000_000
	sc := newSchedule(t, st, "overlap", t0)
	step := func(nowMs, id int64) store.FireOutcome {
		out := fireDue(t, st, nowMs, fireOnce(id, true))
		require.Len(t, out, 1)
		return out[0]
	}
	require.Equal(t, int64(8001), step(t0, 8001).TaskID)
	require.True(t, step(t0+1000, 8002).Overlapped, "the first task is READY")
	_, err := st.Transfer(ctx, store.TransferParams{TaskID: 8001, From: contracts.StatusReady, To: contracts.StatusCancelled, Reason: "test"})
	require.NoError(t, err)
	require.Equal(t, int64(8003), step(t0+2000, 8003).TaskID, "the first task is final")
	fires, err := st.ScheduleFires(ctx, sc.ID)
	require.NoError(t, err)
	require.Equal(t, []store.ScheduleFireRow{{t0, t0, 8001}, {t0 + 1000, t0 + 1000, 0}, {t0 + 2000, t0 + 2000, 8003}}, fires)

	// Several fire times in one plan (catch-up all): the first fires, the
	// rest wait for it.
	out := fireDue(t, st, t0+5000, func(sc *store.Schedule) (store.FirePlan, error) {
		return store.FirePlan{Fires: []store.PlannedFire{{FireMs: t0 + 3000, Task: fireTask(8004, t0+3000)},
			{FireMs: t0 + 4000, Task: fireTask(8005, t0+4000)}}, NextMs: t0 + 6000, SkipWhileRunning: true}, nil
	})
	require.Len(t, out, 2)
	require.True(t, out[0].Overlapped, "8003 is READY")
	require.True(t, out[1].Overlapped)
}

func TestFireDueTakesOnlyDueUnpausedSchedules(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	const t0 = 1_800_000_000_000
	newSchedule(t, st, "later", t0+1)
	newSchedule(t, st, "paused", t0)
	_, err := st.PauseSchedule(ctx, "paused", true, 0)
	require.NoError(t, err)
	require.Empty(t, fireDue(t, st, t0, fireOnce(9001, false)))
	require.Empty(t, testenv.Column[int64](t, st.DB(), `SELECT id FROM tasks`))
	resumed, err := st.PauseSchedule(ctx, "paused", false, t0+5000)
	require.NoError(t, err)
	require.False(t, resumed.Paused)
	require.Equal(t, int64(t0+5000), resumed.NextFireMs)

	// A fire time after the clock's reading is not fired, and the
	// schedule stays due.
	_, out, err := st.FireDue(ctx, store.FireDueParams{NowMs: t0 + 1, Limit: 10, FiredAt: func() int64 { return t0 }},
		fireOnce(9002, false))
	require.NoError(t, err)
	require.Empty(t, out)
	later, err := st.GetSchedule(ctx, "later")
	require.NoError(t, err)
	require.Equal(t, int64(t0+1), later.NextFireMs)
}
