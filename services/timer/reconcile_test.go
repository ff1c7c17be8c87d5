package timer

import (
	"context"
	"strconv"
	"strings"
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

// TestReconcileRedrivesARetryDispatchedOnlyBeforeItsBackoff: a RETRYING
// task whose backoff is long over was dispatched lately, but for the
// attempt before it (the mark predates its due time). Its READY event may
// sit unacknowledged with a killed timer until NATS redelivers it (30 s):
// the reconciler re-drives it after the grace. A READY task dispatched
// after it came due is left alone.
func TestReconcileRedrivesARetryDispatchedOnlyBeforeItsBackoff(t *testing.T) {
	tm, st := newTimer(t)
	tm.cfg.ReconcileGrace = time.Millisecond
	ctx := context.Background()
	now, err := tm.rdb.Time(ctx).Result()
	require.NoError(t, err)
	due := now.Add(-2 * time.Second).UnixMilli()
	const retry, ready = int64(9100), int64(9101)
	for _, id := range []int64{retry, ready} {
		_, _, err := st.CreateTask(ctx, store.NewTask{ID: id, Type: "ax.noop", Priority: contracts.PriorityNormal,
			Payload: []byte(`{}`), Status: contracts.StatusReady, NextRunTimeMs: due, MaxRetries: 3, TimeoutMs: 1000, Reason: "test"})
		require.NoError(t, err)
	}
	// The retry: claimed, failed, RETRYING with its backoff over at due.
	res, err := st.Transfer(ctx, store.TransferParams{TaskID: retry, From: contracts.StatusReady, To: contracts.StatusRunning,
		Claim: true, Executor: "n1", Actor: "executor@n1", Reason: "claimed"})
	require.NoError(t, err)
	attempt, next := res.Attempt, due
	_, err = st.TransferChain(ctx,
		store.TransferParams{TaskID: retry, From: contracts.StatusRunning, To: contracts.StatusFailed, Attempt: &attempt, Reason: "handler failed"},
		store.TransferParams{TaskID: retry, From: contracts.StatusFailed, To: contracts.StatusRetrying, Attempt: &attempt,
			IncrementRetry: true, NextRunTimeMs: &next, Reason: "retry 1 of 3"})
	require.NoError(t, err)
	require.NoError(t, tm.rdb.ZAdd(ctx, tm.keys.Dispatched(),
		redis.Z{Score: float64(due - 500), Member: strconv.FormatInt(retry, 10)},
		redis.Z{Score: float64(due + 10), Member: strconv.FormatInt(ready, 10)}).Err())
	time.Sleep(20 * time.Millisecond) // past the grace on the database clock

	got, err := tm.Reconcile(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, got)
	indexed, err := tm.rdb.ZRange(ctx, tm.keys.Lane(contracts.PriorityNormal), 0, -1).Result()
	require.NoError(t, err)
	require.Len(t, indexed, 1)
	require.True(t, strings.HasPrefix(indexed[0], strconv.FormatInt(retry, 10)+":"), indexed[0])
}
