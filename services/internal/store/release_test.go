package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// readyRoute reads the route of task id's READY history row (0 timer, 1
// dispatch, 2 dispatched), the only record of who takes the task on.
func readyRoute(t *testing.T, st *store.Store, id int64) int {
	t.Helper()
	var route int
	require.NoError(t, st.DB().QueryRow(`SELECT route FROM task_history WHERE task_id = ? AND to_status = 'READY'
		ORDER BY id DESC LIMIT 1`, id).Scan(&route))
	return route
}

// A writer that dispatches its own releases is told, after the commit,
// exactly the tasks its transaction made READY and due at once (children
// released by a final transfer): not the child that waits for its delay
// (the timer's), not the one cancelled, not the one still waiting for
// another parent. Their READY rows say "dispatched", so the relay leaves
// their dispatch alone. The plain batch leaves the same releases to the
// relay ("dispatch") and reports none.
func TestTransferBatchDispatchingListsWhatItReleases(t *testing.T) {
	for _, tc := range []struct {
		name     string
		dispatch bool
	}{{"writer dispatches", true}, {"relay dispatches", false}} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := testenv.Store(t)
			ctx := context.Background()
			later := time.Now().Add(time.Hour).UnixMilli()
			delayed := dagTask(4, contracts.StatusSuspend, 1)
			delayed.NextRunTimeMs = later
			onFailure := dagTask(5, contracts.StatusSuspend, 1)
			onFailure.Parents[0].When = contracts.WhenFailure
			_, err := st.CreateTasks(ctx, []store.NewTask{
				dagTask(1, contracts.StatusReady), dagTask(2, contracts.StatusReady),
				dagTask(3, contracts.StatusSuspend, 1), delayed, onFailure,
				dagTask(6, contracts.StatusSuspend, 1, 2), // waits for 2 as well
			})
			require.NoError(t, err)
			one := 1
			chain := [][]store.TransferParams{{
				{TaskID: 1, From: contracts.StatusReady, To: contracts.StatusRunning, Claim: true, Executor: "n"},
				{TaskID: 1, From: contracts.StatusRunning, To: contracts.StatusSuccess, Attempt: &one},
			}}
			var released []store.Released
			if tc.dispatch {
				var res []store.ChainResult
				res, released, err = st.TransferBatchDispatching(ctx, chain)
				require.NoError(t, err)
				require.NoError(t, res[0].Err)
			} else {
				res, err := st.TransferBatch(ctx, chain)
				require.NoError(t, err)
				require.NoError(t, res[0].Err)
			}
			require.Equal(t, contracts.StatusReady, status(t, st, 3))
			require.Equal(t, contracts.StatusReady, status(t, st, 4))
			require.Equal(t, contracts.StatusCancelled, status(t, st, 5))
			require.Equal(t, contracts.StatusSuspend, status(t, st, 6))
			require.Equal(t, 0, readyRoute(t, st, 4), "the delayed child is the timer's")
			if !tc.dispatch {
				require.Empty(t, released)
				require.Equal(t, 1, readyRoute(t, st, 3), "the relay dispatches the child")
				return
			}
			require.Len(t, released, 1)
			r := released[0].Ref
			require.EqualValues(t, 3, r.TaskID)
			require.Equal(t, "ax.noop", r.Type)
			require.Equal(t, contracts.StatusReady, r.To)
			require.Equal(t, contracts.PriorityNormal, r.Priority)
			require.Zero(t, r.Attempt)
			require.LessOrEqual(t, r.NextRunTimeMs, time.Now().UnixMilli())
			require.Equal(t, 2, readyRoute(t, st, 3), "the writer dispatches the child, the relay only its event")
		})
	}
}

// A transaction that does not commit releases nothing, and reports
// nothing: the chain that would end the parent loses its fence.
func TestTransferBatchDispatchingReportsNothingOfALosingChain(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	_, err := st.CreateTasks(ctx, []store.NewTask{dagTask(1, contracts.StatusReady), dagTask(2, contracts.StatusSuspend, 1)})
	require.NoError(t, err)
	stale := 7
	res, released, err := st.TransferBatchDispatching(ctx, [][]store.TransferParams{{
		{TaskID: 1, From: contracts.StatusReady, To: contracts.StatusRunning, Claim: true, Executor: "n"},
		{TaskID: 1, From: contracts.StatusRunning, To: contracts.StatusSuccess, Attempt: &stale},
	}})
	require.NoError(t, err)
	require.Error(t, res[0].Err)
	require.Empty(t, released)
	require.Equal(t, contracts.StatusSuspend, status(t, st, 2))
}

func status(t *testing.T, st *store.Store, id int64) contracts.Status {
	t.Helper()
	task, err := st.GetTask(context.Background(), id)
	require.NoError(t, err)
	return task.Status
}
