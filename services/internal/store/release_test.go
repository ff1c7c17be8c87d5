package store_test

import (
	"context"
	"strings"
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

// A retry whose backoff has passed by the time its transaction writes
// (ReadyWhenDue) goes on to READY in that transaction, due at once: the
// writer that collects releases is told of it and its rows say
// "dispatched", else the relay dispatches it ("dispatch"); its RETRYING
// row is not the timer's either way. A backoff still running leaves the
// task RETRYING for the timer, as before.
func TestElapsedBackoffEndsInTheSameTransaction(t *testing.T) {
	for _, tc := range []struct {
		name        string
		dispatching bool
		backoff     time.Duration
		want        contracts.Status
		history     string
		routes      []int // of the RETRYING row, then the READY row
	}{
		{"elapsed, the writer dispatches", true, -time.Millisecond, contracts.StatusReady, "READY>RUNNING>FAILED>RETRYING>READY", []int{2, 2}},
		{"elapsed, the relay dispatches", false, -time.Millisecond, contracts.StatusReady, "READY>RUNNING>FAILED>RETRYING>READY", []int{2, 1}},
		{"still running, the timer's", true, time.Hour, contracts.StatusRetrying, "READY>RUNNING>FAILED>RETRYING", []int{0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, _ := testenv.Store(t)
			ctx := context.Background()
			nt := dagTask(1, contracts.StatusReady)
			nt.DAG, nt.MaxRetries = false, 3
			_, err := st.CreateTasks(ctx, []store.NewTask{nt})
			require.NoError(t, err)
			one, msg := 1, "boom"
			due := time.Now().Add(tc.backoff).UnixMilli()
			chain := [][]store.TransferParams{{
				{TaskID: 1, From: contracts.StatusReady, To: contracts.StatusRunning, Claim: true, Executor: "n"},
				{TaskID: 1, From: contracts.StatusRunning, To: contracts.StatusFailed, Attempt: &one, LastError: &msg},
				{TaskID: 1, From: contracts.StatusFailed, To: contracts.StatusRetrying, Attempt: &one, IncrementRetry: true,
					NextRunTimeMs: &due, ClearExecutor: true, ReadyWhenDue: true},
			}}
			var (
				res      []store.ChainResult
				released []store.Released
			)
			if tc.dispatching {
				res, released, err = st.TransferBatchDispatching(ctx, chain)
			} else {
				res, err = st.TransferBatch(ctx, chain)
			}
			require.NoError(t, err)
			require.NoError(t, res[0].Err)
			require.Len(t, res[0].Results, 3, "one result per step asked for")
			task, err := st.GetTask(ctx, 1)
			require.NoError(t, err)
			require.Equal(t, tc.want, task.Status)
			require.Equal(t, 1, task.Attempt)
			require.Equal(t, 1, task.RetryCount)
			require.Empty(t, task.ExecutorAddr)
			require.Equal(t, "boom", task.LastError)
			h, err := st.History(ctx, 1)
			require.NoError(t, err)
			var seq []string
			for _, r := range h {
				seq = append(seq, string(r.To))
			}
			require.Equal(t, tc.history, strings.Join(seq, ">"))
			var routes []int
			rows, err := st.DB().Query(`SELECT route FROM task_history WHERE task_id = 1 AND to_status IN ('RETRYING', 'READY') ORDER BY id`)
			require.NoError(t, err)
			for rows.Next() {
				var r int
				require.NoError(t, rows.Scan(&r))
				routes = append(routes, r)
			}
			require.NoError(t, rows.Close())
			require.Equal(t, tc.routes, routes[1:], "routes after the submission's READY row")
			if tc.dispatching && tc.want == contracts.StatusReady {
				require.Len(t, released, 1)
				require.EqualValues(t, 1, released[0].Ref.TaskID)
				require.Equal(t, 1, released[0].Ref.Attempt)
				require.Equal(t, due, released[0].Ref.NextRunTimeMs)
				require.Equal(t, "backoff elapsed", h[len(h)-1].Reason)
			} else {
				require.Empty(t, released)
			}
		})
	}
}
