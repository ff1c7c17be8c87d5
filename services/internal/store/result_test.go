package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestProgressIsFencedByAttempt: only the current attempt of a RUNNING task
// writes progress.
func TestProgressIsFencedByAttempt(t *testing.T) {
	ctx := context.Background()
	st, _ := testenv.Store(t)
	task := newTask(t, st, nil)
	p := store.ProgressParams{TaskID: task.ID, Attempt: 1, Percent: 10, Message: "m"}
	ok, err := st.SetProgress(ctx, p)
	require.NoError(t, err)
	require.False(t, ok, "a READY task has no running attempt")

	_, err = st.Transfer(ctx, store.TransferParams{TaskID: task.ID, From: contracts.StatusReady, To: contracts.StatusRunning,
		Claim: true, Executor: "n1", Reason: "test"})
	require.NoError(t, err)
	ok, err = st.SetProgress(ctx, store.ProgressParams{TaskID: task.ID, Attempt: 0, Percent: 99})
	require.NoError(t, err)
	require.False(t, ok, "a stale attempt")
	ok, err = st.SetProgress(ctx, p)
	require.NoError(t, err)
	require.True(t, ok)
	got, err := st.GetTask(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, 10, got.Progress.Percent)
	require.Equal(t, "m", got.Progress.Message)
}
