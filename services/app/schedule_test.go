package app_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestScheduleFiresOrdinaryTasks runs the whole system with two
// schedules: every fire of one is an ordinary task that runs to SUCCESS
// and names its origin; the other, with overlap skip, fires an ax.sleep
// task that runs 2.5 s every second, so it fires again only once the
// previous task has finished and its runs never overlap.
func TestScheduleFiresOrdinaryTasks(t *testing.T) {
	_, k := testenv.Redis(t)
	sys := startSystem(t, "127.0.0.1:6379", k.Prefix, nil)
	ctx := context.Background()
	_, err := sys.api.CreateSchedule(ctx, contracts.ScheduleRequest{Name: "ticks", Cron: "* * * * * *",
		Task: contracts.TaskTemplate{Type: "ax.noop"}})
	require.NoError(t, err)
	_, err = sys.api.CreateSchedule(ctx, contracts.ScheduleRequest{Name: "sleepy", Cron: "* * * * * *", Overlap: "skip",
		Task: contracts.TaskTemplate{Type: "ax.sleep", Payload: json.RawMessage(`{"ms":2500}`)}})
	require.NoError(t, err)
	time.Sleep(9 * time.Second)
	for _, name := range []string{"ticks", "sleepy"} {
		_, err := sys.api.PauseSchedule(ctx, name, true)
		require.NoError(t, err)
	}

	ticks := testenv.Column[string](t, sys.db, `SELECT CAST(task_id AS CHAR) FROM schedule_fires WHERE schedule_name = 'ticks' ORDER BY fire_time`)
	require.GreaterOrEqual(t, len(ticks), 7)
	testenv.Eventually(t, 30*time.Second, "every fired task SUCCESS", func() bool {
		n := testenv.Column[int](t, sys.db, `SELECT COUNT(*) FROM tasks t JOIN schedule_fires f ON f.task_id = t.id
			WHERE f.schedule_name = 'ticks' AND t.status = 'SUCCESS'`)
		return n[0] == len(ticks)
	})
	task, err := sys.api.Get(ctx, ticks[0])
	require.NoError(t, err)
	require.NotNil(t, task.Origin)
	require.Equal(t, "ticks", task.Origin.Schedule)
	require.False(t, task.NextRunTime.Before(task.Origin.FireTime), "due at its fire time")
	hist, err := sys.api.History(ctx, ticks[0])
	require.NoError(t, err)
	require.Contains(t, hist.History[0].Reason, "fired by schedule ticks for "+task.Origin.FireTime.Format(time.RFC3339))

	// Each sleepy fire that made a task came after the previous task had
	// ended; the fire times between were passed over.
	type run struct{ fire, firedAt, started, ended int64 }
	rows, err := sys.db.Query(`SELECT f.fire_time, f.fired_at,
		COALESCE((SELECT UNIX_TIMESTAMP(MIN(h.created_at)) * 1000 FROM task_history h WHERE h.task_id = f.task_id AND h.to_status = 'RUNNING'), 0),
		COALESCE((SELECT UNIX_TIMESTAMP(MAX(h.created_at)) * 1000 FROM task_history h WHERE h.task_id = f.task_id AND h.to_status = 'SUCCESS'), 0),
		f.task_id IS NULL
		FROM schedule_fires f WHERE f.schedule_name = 'sleepy' ORDER BY f.fire_time`)
	require.NoError(t, err)
	var runs []run
	overlapped := 0
	for rows.Next() {
		var (
			r       run
			firedAt int64
			st, en  float64
			skipped bool
		)
		require.NoError(t, rows.Scan(&r.fire, &firedAt, &st, &en, &skipped))
		if skipped {
			overlapped++
			continue
		}
		r.firedAt, r.started, r.ended = firedAt, int64(st), int64(en)
		runs = append(runs, r)
	}
	require.NoError(t, rows.Err())
	rows.Close()
	require.GreaterOrEqual(t, len(runs), 2, "the second run comes after the first ended")
	require.GreaterOrEqual(t, overlapped, 4, "fire times passed over while a run was under way")
	for i := 1; i < len(runs); i++ {
		prev := runs[i-1]
		if prev.ended == 0 {
			t.Fatalf("run for fire time %d has no SUCCESS, yet fire time %d made a task", prev.fire, runs[i].fire)
		}
		// Both clocks are this host's: the history's, and the Redis clock
		// the timer fired by (never ahead of Redis, so allow a little).
		require.GreaterOrEqual(t, runs[i].firedAt, prev.ended-100, "fired at %d before run %d ended at %d", runs[i].firedAt, i-1, prev.ended)
		require.GreaterOrEqual(t, runs[i].fire-prev.fire, int64(2000), "runs %s apart", strconv.FormatInt(runs[i].fire-prev.fire, 10))
	}
}
