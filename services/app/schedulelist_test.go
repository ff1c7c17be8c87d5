package app_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestListTasksBySchedule runs the whole system with a schedule firing
// every second and pages through GET /v1/tasks?schedule= two at a time:
// every fire's task once, latest fire time first, each naming its origin;
// an unknown schedule lists nothing.
func TestListTasksBySchedule(t *testing.T) {
	_, k := testenv.Redis(t)
	sys := startSystem(t, "127.0.0.1:6379", k.Prefix, nil)
	ctx := context.Background()
	_, err := sys.api.CreateSchedule(ctx, contracts.ScheduleRequest{Name: "listed", Cron: "* * * * * *",
		Task: contracts.TaskTemplate{Type: "ax.noop"}})
	require.NoError(t, err)
	_, err = sys.api.CreateSchedule(ctx, contracts.ScheduleRequest{Name: "other", Cron: "* * * * * *",
		Task: contracts.TaskTemplate{Type: "ax.noop"}})
	require.NoError(t, err)
	testenv.Eventually(t, 20*time.Second, "five fires", func() bool {
		return testenv.Column[int](t, sys.db, `SELECT COUNT(*) FROM schedule_fires WHERE schedule_name = 'listed'`)[0] >= 5
	})
	for _, name := range []string{"listed", "other"} {
		_, err := sys.api.PauseSchedule(ctx, name, true)
		require.NoError(t, err)
	}
	want := testenv.Column[string](t, sys.db, `SELECT CAST(task_id AS CHAR) FROM schedule_fires
		WHERE schedule_name = 'listed' AND task_id IS NOT NULL ORDER BY fire_time DESC`)
	require.GreaterOrEqual(t, len(want), 5, "more than two pages")

	var (
		got    []string
		cursor string
		last   time.Time
	)
	for range len(want) + 1 {
		page, err := sys.api.ListScheduleTasks(ctx, "listed", 2, cursor)
		require.NoError(t, err)
		for _, task := range page.Tasks {
			require.NotNil(t, task.Origin)
			require.Equal(t, "listed", task.Origin.Schedule)
			if !last.IsZero() {
				require.True(t, task.Origin.FireTime.Before(last), "latest fire time first")
			}
			last = task.Origin.FireTime
			got = append(got, task.ID)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	require.Equal(t, want, got)

	none, err := sys.api.ListScheduleTasks(ctx, "never.created", 10, "")
	require.NoError(t, err)
	require.Empty(t, none.Tasks)
	require.Empty(t, none.NextCursor)
}
