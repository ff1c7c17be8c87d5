package reaper_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
	"github.com/axsched/ax/services/reaper"
)

// A child whose parents ended without settling it (their rows written
// behind the store's back, as a lost release would leave them) is settled
// by the reconciler from the parents' rows, once, and only after the grace.
func TestSettleSuspendedReleasesChildrenWhoseParentsEnded(t *testing.T) {
	st, _ := testenv.Store(t)
	rdb, k := testenv.Redis(t)
	ctx := context.Background()
	newTask := func(id int64, status contracts.Status, parents ...int64) {
		nt := store.NewTask{ID: id, Type: "ax.noop", Priority: contracts.PriorityNormal, Status: status,
			NextRunTimeMs: 1, MaxRetries: 1, TimeoutMs: 1000, Reason: "t", DAG: true}
		for _, p := range parents {
			nt.Parents = append(nt.Parents, store.Dependency{ParentID: p, When: contracts.WhenSuccess})
		}
		_, _, err := st.CreateTask(ctx, nt)
		require.NoError(t, err)
	}
	newTask(1, contracts.StatusReady)
	newTask(2, contracts.StatusReady)
	newTask(3, contracts.StatusSuspend, 1, 2) // both parents succeed: released
	newTask(4, contracts.StatusSuspend, 1)    // parent 1 ... and 5
	newTask(5, contracts.StatusReady)
	_, err := st.DB().Exec(`INSERT INTO task_dependencies (parent_id, child_id, cond) VALUES (5, 4, 'success')`)
	require.NoError(t, err)
	newTask(6, contracts.StatusSuspend, 2) // parent 2 ends, but too recently
	_, err = st.DB().Exec(`UPDATE tasks SET status = 'SUCCESS' WHERE id IN (1, 2)`)
	require.NoError(t, err)
	_, err = st.DB().Exec(`UPDATE tasks SET updated_at = NOW(3) - INTERVAL 1 MINUTE WHERE id IN (3, 4)`)
	require.NoError(t, err)

	r := reaper.New(reaper.Config{}, st, rdb, k, clock.System{}, testenv.Logger(t))
	n, err := r.SettleSuspended(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, contracts.StatusReady, status(t, st, 3))
	require.Equal(t, contracts.StatusSuspend, status(t, st, 4), "parent 5 has not ended")
	require.Equal(t, contracts.StatusSuspend, status(t, st, 6), "within the grace")

	n, err = r.SettleSuspended(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "settled once")
	h, err := st.History(ctx, 3)
	require.NoError(t, err)
	require.Len(t, h, 2)
	require.Contains(t, h[1].Reason, "1 SUCCESS, 2 SUCCESS")
}
