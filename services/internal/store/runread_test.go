package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// RunRows reads what a claim checks and what the attempt runs with,
// without locking; Claimable is the claim's fence on that read.
func TestRunRowsReadWhatAClaimChecks(t *testing.T) {
	ctx := context.Background()
	st, _ := testenv.Store(t)
	a, b := newTask(t, st, nil), newTask(t, st, nil)
	_, err := st.Transfer(ctx, claim(b.ID, 0, "n1"))
	require.NoError(t, err)

	rows, err := st.RunRows(ctx, []int64{a.ID, b.ID, a.ID, 999999})
	require.NoError(t, err)
	require.Len(t, rows, 2, "missing ids are absent, repeated ones read once")
	ra := rows[a.ID]
	require.Equal(t, contracts.StatusReady, ra.Status)
	require.Equal(t, 0, ra.Attempt)
	require.Equal(t, a.NextRunTimeMs, ra.NextRunTimeMs)
	require.JSONEq(t, `{}`, string(ra.Run.Payload))
	require.EqualValues(t, 1000, ra.Run.TimeoutMs)
	require.Equal(t, 3, ra.Run.MaxRetries)
	require.Equal(t, contracts.StatusRunning, rows[b.ID].Status)
	require.Equal(t, 1, rows[b.ID].Attempt)

	for _, tc := range []struct {
		name    string
		row     store.RunRow
		attempt int
		dueBy   int64
		want    bool
	}{
		{"ready at the attempt, no due bound", ra, 0, 0, true},
		{"ready at the attempt, due in time", ra, 0, ra.NextRunTimeMs, true},
		{"re-scheduled later", ra, 0, ra.NextRunTimeMs - 1, false},
		{"another attempt", ra, 1, 0, false},
		{"claimed already", rows[b.ID], 1, 0, false},
	} {
		require.Equal(t, tc.want, tc.row.Claimable(tc.attempt, tc.dueBy), tc.name)
	}
}

// A batch of fused chains — each task's claim and outcome — writes every
// task's two history rows in order and leaves each row at its outcome,
// whatever order the updates were folded in; a claim that skips the run
// fields returns none, and a refused claim sinks only its own chain.
func TestTransferBatchOfFusedChains(t *testing.T) {
	ctx := context.Background()
	st, _ := testenv.Store(t)
	tasks := []*store.Task{newTask(t, st, nil), newTask(t, st, nil), newTask(t, st, nil), newTask(t, st, nil)}
	one := 1
	boom := "boom"
	_, err := st.Transfer(ctx, store.TransferParams{TaskID: tasks[3].ID, From: contracts.StatusReady,
		To: contracts.StatusCancelled, Reason: "test: cancelled"})
	require.NoError(t, err)
	chains := make([][]store.TransferParams, len(tasks))
	for i, task := range tasks {
		c := claim(task.ID, 0, "n1")
		c.SkipRun, c.RecordRejection = true, true
		outcome := store.TransferParams{TaskID: task.ID, From: contracts.StatusRunning, To: contracts.StatusSuccess,
			Attempt: &one, Reason: "done"}
		if i == 1 {
			outcome = store.TransferParams{TaskID: task.ID, From: contracts.StatusRunning, To: contracts.StatusFailed,
				Attempt: &one, LastError: &boom, Reason: "failed"}
		}
		chains[i] = []store.TransferParams{c, outcome}
	}
	out, err := st.TransferBatch(ctx, chains)
	require.NoError(t, err)
	for i, want := range []contracts.Status{contracts.StatusSuccess, contracts.StatusFailed, contracts.StatusSuccess} {
		require.NoError(t, out[i].Err)
		require.Nil(t, out[i].Results[0].Run, "the claim skipped the run fields")
		got, err := st.GetTask(ctx, tasks[i].ID)
		require.NoError(t, err)
		require.Equal(t, want, got.Status)
		require.Equal(t, 1, got.Attempt)
		require.Equal(t, "n1", got.ExecutorAddr)
		hist, err := st.History(ctx, tasks[i].ID)
		require.NoError(t, err)
		require.Len(t, hist, 3)
		require.Equal(t, contracts.StatusRunning, hist[1].To)
		require.Equal(t, want, hist[2].To)
		require.Equal(t, hist[1].At, hist[2].At, "one transaction")
	}
	var ce *store.ConflictError
	require.ErrorAs(t, out[3].Err, &ce)
	hist, err := st.History(ctx, tasks[3].ID)
	require.NoError(t, err)
	require.Len(t, hist, 3, "READY, CANCELLED and the recorded refusal")
	require.Contains(t, hist[2].Reason, "rejected READY->RUNNING from attempt 0: the task is CANCELLED")
}
