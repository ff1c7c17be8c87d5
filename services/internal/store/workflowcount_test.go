package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// wfRow is what a workflow's row says of its progress.
type wfRow struct {
	Status contracts.WorkflowStatus
	Reason string
	Open   int
}

func readWorkflowRow(t *testing.T, st *store.Store, id int64) wfRow {
	t.Helper()
	var r wfRow
	require.NoError(t, st.DB().QueryRow(`SELECT status, reason, open_steps FROM workflows WHERE id = ?`, id).
		Scan(&r.Status, &r.Reason, &r.Open))
	return r
}

// diamond creates workflow wf: a -> (b, c) -> d, tasks first..first+3,
// each step with a compensation (IDs from first+10 down) when compensated.
func diamond(t *testing.T, st *store.Store, wf, first int64, compensated bool) {
	t.Helper()
	a, b, c, d := first, first+1, first+2, first+3
	steps := []store.NewWorkflowStep{
		{Key: "a", Task: dagTask(a, contracts.StatusReady)},
		{Key: "b", Task: dagTask(b, contracts.StatusSuspend, a)},
		{Key: "c", Task: dagTask(c, contracts.StatusSuspend, a)},
		{Key: "d", Task: dagTask(d, contracts.StatusSuspend, b, c)},
	}
	if compensated {
		for i := range steps {
			comp := dagTask(first+10-int64(i), contracts.StatusSuspend)
			steps[i].Compensation = &comp
		}
	}
	_, _, err := st.CreateWorkflow(context.Background(), store.NewWorkflow{ID: wf, Name: "diamond", Steps: steps})
	require.NoError(t, err)
}

// Successes of the steps of a workflow without compensations count down
// its open steps with one UPDATE that does not read the workflow first;
// every other end reads and locks it. Both ways must leave the same row
// after every batch: a diamond's steps ended one, two (in one batch) and
// one at a time, alone, beside a workflow the long way (which sends the
// batch the long way), and beside a workflow counted down by another
// number of steps.
func TestStepSuccessesCountDownTheirWorkflowEitherWay(t *testing.T) {
	for _, shape := range stepShapes {
		t.Run(shape.name, func(t *testing.T) { stepSuccessesCountDown(t, shape) })
	}
}

// stepShape is where a store lists the steps of a workflow without
// compensations: on its row (the default) or in workflow_steps.
type stepShape struct {
	name    string
	inTable bool
	// listed is the role bit of such a workflow's steps (roleListed).
	listed int
}

var stepShapes = []stepShape{{"steps on the row", false, 16}, {"steps in workflow_steps", true, 0}}

func (sh stepShape) store(t *testing.T) *store.Store {
	t.Helper()
	st, _ := testenv.StoreWith(t, store.Options{Actor: "test", StepsInTable: sh.inTable})
	return st
}

func stepSuccessesCountDown(t *testing.T, shape stepShape) {
	st := shape.store(t)
	want := []wfRow{
		{contracts.WorkflowRunning, "", 3},
		{contracts.WorkflowRunning, "", 1},
		{contracts.WorkflowSucceeded, "every step ended", 0},
	}
	cases := []struct {
		name string
		// workflows: id, first task, compensated; the first is the one checked.
		workflows [][3]int64
		// pair: a two-step workflow (6: tasks 600, 601) whose first step
		// ends with b and c, counted down by one, the diamond by two.
		pair bool
	}{
		{"no compensations, alone", [][3]int64{{1, 100, 0}}, false},
		{"with compensations, alone", [][3]int64{{2, 200, 1}}, false},
		{"no compensations, beside one with", [][3]int64{{3, 300, 0}, {4, 400, 1}}, false},
		{"no compensations, beside one of another count", [][3]int64{{5, 500, 0}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, w := range tc.workflows {
				diamond(t, st, w[0], w[1], w[2] == 1)
			}
			role := 1
			if tc.workflows[0][2] == 0 {
				role = 5 | shape.listed // a step, of a workflow without compensations
			}
			var got int
			require.NoError(t, st.DB().QueryRow(`SELECT workflow_role FROM tasks WHERE id = ?`, tc.workflows[0][1]).Scan(&got))
			require.Equal(t, role, got)
			// Batches: a; b and c; d, of every workflow of the case.
			for i, offsets := range [][]int64{{0}, {1, 2}, {3}} {
				var ids []int64
				for _, w := range tc.workflows {
					for _, o := range offsets {
						ids = append(ids, w[1]+o)
					}
				}
				if tc.pair && i == 1 {
					_, _, err := st.CreateWorkflow(context.Background(), store.NewWorkflow{ID: 6, Name: "pair", Steps: []store.NewWorkflowStep{
						{Key: "x", Task: dagTask(600, contracts.StatusReady)}, {Key: "y", Task: dagTask(601, contracts.StatusSuspend, 600)}}})
					require.NoError(t, err)
					ids = append(ids, 600)
				}
				claimAndEnd(t, st, ids, contracts.StatusSuccess)
				for _, w := range tc.workflows {
					require.Equal(t, want[i], readWorkflowRow(t, st, w[0]), "workflow %d after batch %d", w[0], i+1)
				}
			}
			if tc.pair {
				require.Equal(t, wfRow{contracts.WorkflowRunning, "", 1}, readWorkflowRow(t, st, 6))
				claimAndEnd(t, st, []int64{601}, contracts.StatusSuccess)
				require.Equal(t, wfRow{contracts.WorkflowSucceeded, "every step ended", 0}, readWorkflowRow(t, st, 6))
			}
		})
	}
}

// A step of a workflow without compensations that fails is not a success
// counted down: the workflow fails, and the step that waited for it is
// cancelled, though a success of another workflow ends in the same batch.
func TestAFailureBesideSuccessesStillFailsItsWorkflow(t *testing.T) {
	st, _ := testenv.Store(t)
	diamond(t, st, 1, 100, false)
	diamond(t, st, 2, 200, false)
	claimAndEnd(t, st, []int64{100, 200}, contracts.StatusSuccess)
	ctx := context.Background()
	claims := [][]store.TransferParams{
		{{TaskID: 101, From: contracts.StatusReady, To: contracts.StatusRunning, Claim: true, Executor: "n"}},
		{{TaskID: 201, From: contracts.StatusReady, To: contracts.StatusRunning, Claim: true, Executor: "n"}},
	}
	_, err := st.TransferBatch(ctx, claims)
	require.NoError(t, err)
	one := 1
	res, err := st.TransferBatch(ctx, [][]store.TransferParams{
		{{TaskID: 101, From: contracts.StatusRunning, To: contracts.StatusSuccess, Attempt: &one}},
		{{TaskID: 201, From: contracts.StatusRunning, To: contracts.StatusFailed, Attempt: &one, Reason: "boom"}},
	})
	require.NoError(t, err)
	for _, r := range res {
		require.NoError(t, r.Err)
	}
	require.Equal(t, wfRow{contracts.WorkflowRunning, "", 2}, readWorkflowRow(t, st, 1))
	failed := readWorkflowRow(t, st, 2)
	require.Equal(t, contracts.WorkflowFailed, failed.Status)
	require.Contains(t, failed.Reason, `step "b"`)
	require.Equal(t, 1, countStatus(t, st, contracts.StatusCancelled, 203, 203), "d waited for b's success")
}
