package store_test

import (
	"context"
	"errors"
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

// TestFireScheduleOneTaskPerFireTime races 20 timers on one fire time: one
// creates the task, the others write nothing.
func TestFireScheduleOneTaskPerFireTime(t *testing.T) {
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
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := st.FireSchedule(ctx, store.Fire{ScheduleID: sc.ID, Name: sc.Name, ExpectNextMs: fireMs,
				NextMs: fireMs + 1000, FireMs: fireMs, FiredAtMs: fireMs, Task: fireTask(int64(5000+i), fireMs)})
			if err != nil {
				if !errors.Is(err, store.ErrScheduleMoved) && !errors.Is(err, store.ErrFired) {
					t.Errorf("fire: %v", err)
				}
				return
			}
			mu.Lock()
			wins = append(wins, out.TaskID)
			mu.Unlock()
		}()
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
}

// TestFireScheduleUniqueKeyIsTheArbiter fires a fire time again with a
// fence that passes (the schedule's next fire time was set back, as a
// confused replica or an operator might): the unique key refuses it and
// nothing is written.
func TestFireScheduleUniqueKeyIsTheArbiter(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	const fireMs = 1_800_000_000_000
	sc := newSchedule(t, st, "again", fireMs)
	fire := store.Fire{ScheduleID: sc.ID, Name: sc.Name, ExpectNextMs: fireMs, NextMs: fireMs + 1000,
		FireMs: fireMs, FiredAtMs: fireMs, Task: fireTask(7001, fireMs)}
	_, err := st.FireSchedule(ctx, fire)
	require.NoError(t, err)
	_, err = st.DB().Exec(`UPDATE schedules SET next_fire_time = ? WHERE id = ?`, fireMs, sc.ID)
	require.NoError(t, err)
	fire.Task = fireTask(7002, fireMs)
	_, err = st.FireSchedule(ctx, fire)
	require.ErrorIs(t, err, store.ErrFired)
	require.Equal(t, []int64{7001}, testenv.Column[int64](t, st.DB(), `SELECT id FROM tasks`))
	got, err := st.GetSchedule(ctx, "again")
	require.NoError(t, err)
	require.Equal(t, int64(fireMs), got.NextFireMs, "the refused fire rolled back its advance too")
}

func TestFireScheduleOverlapSkip(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	const t0 = 1_800_000_000_000
	sc := newSchedule(t, st, "overlap", t0)
	step := func(fireMs int64, id int64) store.FireOutcome {
		out, err := st.FireSchedule(ctx, store.Fire{ScheduleID: sc.ID, Name: sc.Name, ExpectNextMs: fireMs,
			NextMs: fireMs + 1000, FireMs: fireMs, FiredAtMs: fireMs, Task: fireTask(id, fireMs), SkipWhileRunning: true})
		require.NoError(t, err)
		return out
	}
	require.Equal(t, store.FireOutcome{TaskID: 8001}, step(t0, 8001))
	require.Equal(t, store.FireOutcome{Overlapped: true}, step(t0+1000, 8002), "the first task is READY")
	_, err := st.Transfer(ctx, store.TransferParams{TaskID: 8001, From: contracts.StatusReady, To: contracts.StatusCancelled, Reason: "test"})
	require.NoError(t, err)
	require.Equal(t, store.FireOutcome{TaskID: 8003}, step(t0+2000, 8003), "the first task is final")
	fires, err := st.ScheduleFires(ctx, sc.ID)
	require.NoError(t, err)
	require.Equal(t, []store.ScheduleFireRow{{t0, t0, 8001}, {t0 + 1000, t0 + 1000, 0}, {t0 + 2000, t0 + 2000, 8003}}, fires)
}

func TestFireScheduleFencedOnPauseAndNextFire(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	const t0 = 1_800_000_000_000
	sc := newSchedule(t, st, "fenced", t0)
	fire := store.Fire{ScheduleID: sc.ID, Name: sc.Name, ExpectNextMs: t0 - 1000, NextMs: t0 + 1000,
		FireMs: t0, FiredAtMs: t0, Task: fireTask(9001, t0)}
	_, err := st.FireSchedule(ctx, fire)
	require.ErrorIs(t, err, store.ErrScheduleMoved, "stale next fire time")
	_, err = st.PauseSchedule(ctx, "fenced", true, 0)
	require.NoError(t, err)
	fire.ExpectNextMs = t0
	_, err = st.FireSchedule(ctx, fire)
	require.ErrorIs(t, err, store.ErrScheduleMoved, "paused")
	require.Empty(t, testenv.Column[int64](t, st.DB(), `SELECT id FROM tasks`))
	resumed, err := st.PauseSchedule(ctx, "fenced", false, t0+5000)
	require.NoError(t, err)
	require.False(t, resumed.Paused)
	require.Equal(t, int64(t0+5000), resumed.NextFireMs)
}
