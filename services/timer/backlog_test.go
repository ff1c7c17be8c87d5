package timer

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
)

// The backlog counts only what is due, per lane, and ages from the oldest
// due task; a lane holding only future tasks is empty and young. Popping
// the due tasks empties it again, and each pop records how late it was.
func TestBacklogCountsDueTasksAndTheirAgePerLane(t *testing.T) {
	tm, _ := newTimer(t)
	ctx := context.Background()
	now, err := tm.rdb.Time(ctx).Result()
	require.NoError(t, err)
	old, recent, future := now.Add(-20*time.Second).UnixMilli(), now.Add(-time.Second).UnixMilli(), now.Add(time.Hour).UnixMilli()
	require.NoError(t, tm.Index(ctx, []store.DueRef{
		{ID: 1, Priority: contracts.PriorityHigh, NextRunTimeMs: old},
		{ID: 2, Priority: contracts.PriorityHigh, NextRunTimeMs: recent},
		{ID: 3, Priority: contracts.PriorityHigh, NextRunTimeMs: future},
		{ID: 4, Priority: contracts.PriorityLow, NextRunTimeMs: future},
	}))

	got, err := tm.Backlog(ctx)
	require.NoError(t, err)
	require.Len(t, got, len(contracts.Priorities))
	byLane := map[contracts.Priority]LaneBacklog{}
	for _, b := range got {
		byLane[b.Lane] = b
	}
	high := byLane[contracts.PriorityHigh]
	require.EqualValues(t, 2, high.Tasks, "the future task is not backlog")
	require.InDelta(t, 20, high.Age.Seconds(), 2, "the age is the oldest due task's")
	require.Zero(t, byLane[contracts.PriorityLow].Tasks)
	require.Zero(t, byLane[contracts.PriorityLow].Age, "a lane of future tasks has no age")
	require.Equal(t, 2.0, testutil.ToFloat64(metrics.TimerBacklogTasks.WithLabelValues("high")))
	require.InDelta(t, 20, testutil.ToFloat64(metrics.TimerBacklogAge.WithLabelValues("high")), 2)

	before, beforeSum := metrics.Observed(metrics.TimerLoopDelay)
	_, err = tm.RunOnce(ctx)
	require.NoError(t, err)
	after, afterSum := metrics.Observed(metrics.TimerLoopDelay)
	require.EqualValues(t, 2, after-before, "each popped task records its delay")
	require.InDelta(t, 21, afterSum-beforeSum, 3, "20 s late and 1 s late")
	got, err = tm.Backlog(ctx)
	require.NoError(t, err)
	require.Zero(t, got[0].Tasks, "popped tasks are no longer backlog")
	require.Zero(t, testutil.ToFloat64(metrics.TimerBacklogAge.WithLabelValues("high")))
}
