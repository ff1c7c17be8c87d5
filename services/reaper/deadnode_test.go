package reaper_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/membership"
	"github.com/axsched/ax/services/internal/testenv"
	"github.com/axsched/ax/services/reaper"
)

// The registry in Redis only suggests that a node is dead (it may have been
// restored stale, or lost and half rebuilt); MySQL decides. A dead node's
// task whose heartbeat in MySQL is still fresh is being run and stays; once
// that heartbeat is older than the executors' renew interval plus a second
// too, the task goes back to READY.
func TestDeadNodeRecoveryWaitsForMySQLToAgree(t *testing.T) {
	st, _ := testenv.Store(t)
	rdb, k := testenv.Redis(t)
	ctx := context.Background()
	runningOn(t, st, 1, "stale")
	require.NoError(t, membership.Beat(ctx, rdb, k.Nodes(), contracts.Node{Name: "stale",
		LastHeartbeat: time.Now().Add(-30 * time.Second)}))
	// A grace of 11 s: a test process stalled for seconds on a loaded
	// machine still finds the claim's heartbeat fresh.
	r := reaper.New(reaper.Config{RenewInterval: 10 * time.Second}, st, rdb, k, &manualClock{now: time.Now()}, testenv.Logger(t))

	n, err := r.RecoverDeadNodes(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a task MySQL says is heartbeating was taken from its executor")
	require.Equal(t, contracts.StatusRunning, status(t, st, 1))

	_, err = st.DB().ExecContext(ctx, `UPDATE tasks SET last_heartbeat_time = NOW(3) - INTERVAL 12 SECOND WHERE id = 1`)
	require.NoError(t, err)
	n, err = r.RecoverDeadNodes(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, contracts.StatusReady, status(t, st, 1))
	h, err := st.History(ctx, 1)
	require.NoError(t, err)
	require.Contains(t, h[len(h)-1].Reason, "executor stale is dead")
}

// A container restarted under the same hostname, with PID 1 again, is a
// new node: the old incarnation's RUNNING tasks are handed on as soon as it
// has missed its heartbeats, not left to the new process's name, which
// would keep the old one alive in the registry until the leases expire.
func TestRestartUnderTheSameHostnameAndPIDIsANewNode(t *testing.T) {
	st, _ := testenv.Store(t)
	rdb, k := testenv.Redis(t)
	ctx := context.Background()
	old, restarted := membership.Name("pod-0", 1), membership.Name("pod-0", 1)
	require.NotEqual(t, old, restarted, "two starts of pod-0 as PID 1 share a node name")
	require.Contains(t, old, "pod-0-1-", "the hostname and PID stay readable")

	runningOn(t, st, 1, old)
	_, err := st.DB().ExecContext(ctx, `UPDATE tasks SET last_heartbeat_time = NOW(3) - INTERVAL 30 SECOND WHERE id = 1`)
	require.NoError(t, err)
	require.NoError(t, membership.Beat(ctx, rdb, k.Nodes(), contracts.Node{Name: old, LastHeartbeat: time.Now().Add(-30 * time.Second)}))
	require.NoError(t, membership.Beat(ctx, rdb, k.Nodes(), contracts.Node{Name: restarted, LastHeartbeat: time.Now()}))

	r := reaper.New(reaper.Config{}, st, rdb, k, &manualClock{now: time.Now()}, testenv.Logger(t))
	n, err := r.RecoverDeadNodes(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the old incarnation's task was not handed on")
	require.Equal(t, contracts.StatusReady, status(t, st, 1))
}
