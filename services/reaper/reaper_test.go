package reaper_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
	"github.com/axsched/ax/services/reaper"
)

// running creates a task and claims it for a ghost executor that will never
// heartbeat.
func running(t *testing.T, st *store.Store, id int64, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	_, _, err := st.CreateTask(ctx, store.NewTask{ID: id, Type: "ax.noop", Priority: contracts.PriorityNormal,
		Status: contracts.StatusReady, NextRunTimeMs: 1, MaxRetries: 1, TimeoutMs: timeout.Milliseconds(), Reason: "t"})
	require.NoError(t, err)
	zero := 0
	_, err = st.Transfer(ctx, store.TransferParams{TaskID: id, From: contracts.StatusReady, To: contracts.StatusRunning,
		Attempt: &zero, Claim: true, Executor: "ghost", Reason: "claim"})
	require.NoError(t, err)
}

func status(t *testing.T, st *store.Store, id int64) contracts.Status {
	t.Helper()
	task, err := st.GetTask(context.Background(), id)
	require.NoError(t, err)
	return task.Status
}

func TestReaperRecoversSilentTasks(t *testing.T) {
	st, _ := testenv.Store(t)
	require.NoError(t, st.RegisterType(context.Background(), store.TaskType{Name: "ax.noop", TimeoutMs: 1000, MaxRetries: 1}))
	rdb, k := testenv.Redis(t)
	ctx := context.Background()

	running(t, st, 1, time.Hour)           // lease gone, not timed out: back to READY
	running(t, st, 2, time.Hour)           // lease held by a live node: left alone
	running(t, st, 3, 50*time.Millisecond) // silent past timeout + grace: TIMEOUT, then RETRYING
	require.NoError(t, rdb.Set(ctx, k.Lock(2), "live:1", time.Minute).Err())
	require.NoError(t, rdb.Set(ctx, k.Lock(3), "ghost:1", time.Minute).Err())

	r := reaper.New(reaper.Config{Silence: 100 * time.Millisecond, TimeoutGrace: 100 * time.Millisecond},
		st, rdb, k, clock.System{}, testenv.Logger(t))
	n, err := r.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing is silent yet")

	time.Sleep(300 * time.Millisecond)
	n, err = r.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, contracts.StatusReady, status(t, st, 1))
	require.Equal(t, contracts.StatusRunning, status(t, st, 2))
	require.Equal(t, contracts.StatusRetrying, status(t, st, 3))
	require.Zero(t, rdb.Exists(ctx, k.Lock(3)).Val(), "the hung attempt's lease is removed for the retry")

	h, err := st.History(ctx, 3)
	require.NoError(t, err)
	require.Equal(t, contracts.StatusTimeout, h[2].To)
	require.Contains(t, h[2].Reason, "timed out by the reaper")
	h, err = st.History(ctx, 1)
	require.NoError(t, err)
	require.Contains(t, h[2].Reason, "lease expired: executor ghost")

	// A second reaper racing over the same rows finds nothing left to do.
	n, err = r.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
}
