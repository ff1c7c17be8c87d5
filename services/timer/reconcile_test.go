package timer

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
)

// TestReconcileRedrivesOnlyTasksNotDispatchedLately: overdue READY tasks
// missing from the index come back, unless the dispatcher marked them
// recently; a deep backlog of recent marks does not hide the others.
func TestReconcileRedrivesOnlyTasksNotDispatchedLately(t *testing.T) {
	tm, st := newTimer(t)
	tm.cfg.ReconcileGrace = time.Millisecond
	tm.cfg.Batch = 10 // several pages of candidates
	ctx := context.Background()
	now, err := tm.rdb.Time(ctx).Result()
	require.NoError(t, err)

	const n = 35
	ids := make([]int64, n)
	for i := range ids {
		ids[i] = int64(9000 + i)
		_, _, err := st.CreateTask(ctx, store.NewTask{ID: ids[i], Type: "ax.noop", Priority: contracts.PriorityNormal,
			Payload: []byte(`{}`), Status: contracts.StatusReady, NextRunTimeMs: now.Add(-time.Minute).UnixMilli() + int64(i),
			MaxRetries: 3, TimeoutMs: 1000, Reason: "test"})
		require.NoError(t, err)
	}
	// The first 25 (the first pages, by due time) were dispatched a moment
	// ago; task 30 was dispatched long ago; the rest never.
	var marks []redis.Z
	for _, id := range ids[:25] {
		marks = append(marks, redis.Z{Score: float64(now.UnixMilli()), Member: strconv.FormatInt(id, 10)})
	}
	marks = append(marks, redis.Z{Score: float64(now.Add(-time.Hour).UnixMilli()), Member: strconv.FormatInt(ids[30], 10)})
	require.NoError(t, tm.rdb.ZAdd(ctx, tm.keys.Dispatched(), marks...).Err())
	time.Sleep(20 * time.Millisecond) // past the grace on the database clock

	got, err := tm.Reconcile(ctx)
	require.NoError(t, err)
	require.Equal(t, n-25, got)
	indexed, err := tm.rdb.ZRange(ctx, tm.keys.Lane(contracts.PriorityNormal), 0, -1).Result()
	require.NoError(t, err)
	want := make([]string, 0, n-25)
	for _, id := range ids[25:] {
		want = append(want, strconv.FormatInt(id, 10)+":0:ready:ax.noop")
	}
	require.ElementsMatch(t, want, indexed)

	left, err := tm.rdb.ZCard(ctx, tm.keys.Dispatched()).Result()
	require.NoError(t, err)
	require.EqualValues(t, 25, left, "the hour-old mark is trimmed, the recent ones kept")
}
