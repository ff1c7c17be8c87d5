package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

func dagTask(id int64, status contracts.Status, parents ...int64) store.NewTask {
	nt := store.NewTask{ID: id, Type: "ax.noop", Priority: contracts.PriorityNormal, Status: status,
		NextRunTimeMs: 1, MaxRetries: 0, TimeoutMs: 1000, Reason: "test", DAG: true}
	for _, p := range parents {
		nt.Parents = append(nt.Parents, store.Dependency{ParentID: p, When: contracts.WhenSuccess})
	}
	return nt
}

// readyParents creates n READY dag tasks from id first on, in one batch.
func readyParents(t *testing.T, st *store.Store, first int64, n int) []int64 {
	t.Helper()
	parents := make([]store.NewTask, n)
	ids := make([]int64, n)
	for i := range parents {
		ids[i] = first + int64(i)
		parents[i] = dagTask(ids[i], contracts.StatusReady)
	}
	_, err := st.CreateTasks(context.Background(), parents)
	require.NoError(t, err)
	return ids
}

// claimAndEnd claims the READY tasks ids and ends them in to, in one
// batch as an executor's outcomes go.
func claimAndEnd(t *testing.T, st *store.Store, ids []int64, to contracts.Status) {
	t.Helper()
	ctx := context.Background()
	claims := make([][]store.TransferParams, len(ids))
	ends := make([][]store.TransferParams, len(ids))
	for i, id := range ids {
		claims[i] = []store.TransferParams{{TaskID: id, From: contracts.StatusReady, To: contracts.StatusRunning, Claim: true, Executor: "n"}}
		one := 1
		ends[i] = []store.TransferParams{{TaskID: id, From: contracts.StatusRunning, To: to, Attempt: &one}}
	}
	for _, batch := range [][][]store.TransferParams{claims, ends} {
		res, err := st.TransferBatch(ctx, batch)
		require.NoError(t, err)
		for _, r := range res {
			require.NoError(t, r.Err)
		}
	}
}

func countStatus(t *testing.T, st *store.Store, status contracts.Status, from, to int64) int {
	t.Helper()
	var n int
	require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM tasks WHERE status = ? AND id BETWEEN ? AND ?`, string(status), from, to).Scan(&n))
	return n
}

// One parent, 1,000 children: the parent's final transfer releases all of
// them in its own transaction, each with one history row.
func TestFanOutOfAThousandChildren(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	const n = 1000
	const root = int64(10_000)
	_, err := st.CreateTasks(ctx, []store.NewTask{dagTask(root, contracts.StatusReady)})
	require.NoError(t, err)
	kids := make([]store.NewTask, n)
	for i := range kids {
		kids[i] = dagTask(root+1+int64(i), contracts.StatusSuspend, root)
	}
	_, err = st.CreateTasks(ctx, kids)
	require.NoError(t, err)
	require.Equal(t, n, countStatus(t, st, contracts.StatusSuspend, root+1, root+n))

	start := time.Now()
	claimAndEnd(t, st, []int64{root}, contracts.StatusSuccess)
	t.Logf("parent's success released %d children in %s", n, time.Since(start).Round(time.Millisecond))
	require.Equal(t, n, countStatus(t, st, contracts.StatusReady, root+1, root+n))
	var releases int
	require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM task_history WHERE from_status = 'SUSPEND' AND to_status = 'READY'
		AND task_id BETWEEN ? AND ?`, root+1, root+n).Scan(&releases))
	require.Equal(t, n, releases, "one release each")

	// A failing parent cancels its 1,000 children the same way.
	const root2 = int64(20_000)
	_, err = st.CreateTasks(ctx, []store.NewTask{dagTask(root2, contracts.StatusReady)})
	require.NoError(t, err)
	for i := range kids {
		kids[i] = dagTask(root2+1+int64(i), contracts.StatusSuspend, root2)
	}
	_, err = st.CreateTasks(ctx, kids)
	require.NoError(t, err)
	claimAndEnd(t, st, []int64{root2}, contracts.StatusFailed)
	require.Equal(t, n, countStatus(t, st, contracts.StatusCancelled, root2+1, root2+n))
}

// 999 parents, one child: the parents end in concurrent batches, and the
// child is released exactly once, by whichever ends last.
func TestFanInOfManyParentsReleasesOnce(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	const n = 999
	const first = int64(30_000)
	ids := readyParents(t, st, first, n)
	join := first + n
	_, err := st.CreateTasks(ctx, []store.NewTask{dagTask(join, contracts.StatusSuspend, ids...)})
	require.NoError(t, err)

	const workers = 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			var mine []int64
			for i := w; i < n; i += workers {
				mine = append(mine, ids[i])
			}
			for len(mine) > 0 {
				k := min(50, len(mine))
				claimAndEnd(t, st, mine[:k], contracts.StatusSuccess)
				mine = mine[k:]
			}
		})
	}
	wg.Wait()
	h, err := st.History(ctx, join)
	require.NoError(t, err)
	require.Len(t, h, 2, "created, then released once")
	require.Equal(t, contracts.StatusReady, h[1].To)
	require.Equal(t, "released: all 999 parents ended (999 SUCCESS)", h[1].Reason)
}

// A workflow ID already used is ErrIDTaken, so the caller retries with
// fresh IDs, whether or not the workflow has a business key.
func TestCreateWorkflowReportsATakenID(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	one := func(wfID, taskID int64, key *string) error {
		_, _, err := st.CreateWorkflow(ctx, store.NewWorkflow{ID: wfID, Name: "w", BizKey: key,
			Steps: []store.NewWorkflowStep{{Key: "a", Task: dagTask(taskID, contracts.StatusReady)}}})
		return err
	}
	require.NoError(t, one(1, 100, nil))
	require.ErrorIs(t, one(1, 101, nil), store.ErrIDTaken)
	k := "k"
	require.ErrorIs(t, one(1, 102, &k), store.ErrIDTaken)
	require.NoError(t, one(2, 103, &k))
	wf, dedup, err := st.CreateWorkflow(ctx, store.NewWorkflow{ID: 3, Name: "w", BizKey: &k,
		Steps: []store.NewWorkflowStep{{Key: "a", Task: dagTask(104, contracts.StatusReady)}}})
	require.NoError(t, err)
	require.True(t, dedup)
	require.EqualValues(t, 2, wf.ID)
	var n int
	require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM tasks WHERE id IN (101, 102, 104)`).Scan(&n))
	require.Zero(t, n, "nothing of a refused workflow is written")
}

// A task created as a leaf (no children: its end looks for none) gains a
// child while it ends: the child's creation marks it under its row lock,
// so whichever commits first, the other sees it, and no child is left
// SUSPEND behind a parent that ended (the reconciler does not run here).
func TestAChildCreatedWhileItsParentEndsIsNeverMissed(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	const n = 200
	const first = int64(50_000)
	ids := readyParents(t, st, first, n)
	claims := make([][]store.TransferParams, n)
	var err error
	for i, id := range ids {
		claims[i] = []store.TransferParams{{TaskID: id, From: contracts.StatusReady, To: contracts.StatusRunning, Claim: true, Executor: "n"}}
	}
	_, err = st.TransferBatch(ctx, claims)
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; i < n; i += 10 {
			ends := make([][]store.TransferParams, 0, 10)
			for _, id := range ids[i : i+10] {
				one := 1
				ends = append(ends, []store.TransferParams{{TaskID: id, From: contracts.StatusRunning, To: contracts.StatusSuccess, Attempt: &one}})
			}
			res, err := st.TransferBatch(ctx, ends)
			require.NoError(t, err)
			for _, r := range res {
				require.NoError(t, r.Err)
			}
		}
	})
	wg.Go(func() {
		for _, id := range ids {
			_, err := st.CreateTasks(ctx, []store.NewTask{dagTask(id+n, contracts.StatusSuspend, id)})
			require.NoError(t, err)
		}
	})
	wg.Wait()
	require.Equal(t, 0, countStatus(t, st, contracts.StatusSuspend, first+n, first+2*n-1), "children left behind")
	require.Equal(t, n, countStatus(t, st, contracts.StatusReady, first+n, first+2*n-1))
}

// A batch writes its history rows at its end, in the order its transfers
// were made: the parent's claim and end come before the release they
// cause, which the relay publishes in id order.
func TestABatchsHistoryKeepsTheOrderOfItsTransfers(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	_, err := st.CreateTasks(ctx, []store.NewTask{dagTask(1, contracts.StatusReady), dagTask(2, contracts.StatusSuspend, 1),
		dagTask(3, contracts.StatusSuspend, 1)})
	require.NoError(t, err)
	claimAndEnd(t, st, []int64{1}, contracts.StatusSuccess)
	rows, err := st.DB().Query(`SELECT task_id, to_status FROM task_history WHERE from_status <> '' ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id int64
		var to string
		require.NoError(t, rows.Scan(&id, &to))
		got = append(got, fmt.Sprintf("%d:%s", id, to))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"1:RUNNING", "1:SUCCESS", "2:READY", "3:READY"}, got)
}
