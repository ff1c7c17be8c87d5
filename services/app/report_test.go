package app_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
	"github.com/axsched/ax/services/app"
	"github.com/axsched/ax/services/executor"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestHandlerProgressAndResultShowInTheAPI runs a handler that reports
// progress, waits until the API shows it live, then returns a result: the
// result is kept with the SUCCESS and one over the limit is refused to the
// handler.
func TestHandlerProgressAndResultShowInTheAPI(t *testing.T) {
	_, k := testenv.Redis(t)
	seen := make(chan struct{})
	tooBig := make(chan error, 1)
	sys := startSystem(t, "127.0.0.1:6379", k.Prefix, func(c *app.Config) {
		c.Types = append(c.Types, executor.TypeSpec{Name: "test.report", Timeout: time.Minute,
			Handler: executor.HandlerFunc(func(ctx context.Context, task *executor.Task) error {
				if err := executor.SetProgress(ctx, 40, "copied 4 of 10 files"); err != nil {
					return err
				}
				// Within the interval: dropped, not written.
				if err := executor.SetProgress(ctx, 41, "too soon"); err != nil {
					return err
				}
				select {
				case <-seen:
				case <-ctx.Done():
					return ctx.Err()
				}
				tooBig <- executor.SetResult(ctx, strings.Repeat("x", contracts.MaxResultBytes))
				return executor.SetResult(ctx, map[string]any{"files": 10, "bucket": "b1"})
			})})
	})
	ctx := context.Background()
	task, err := sys.api.Submit(ctx, contracts.SubmitRequest{Type: "test.report"})
	require.NoError(t, err)
	running := waitStatus(t, sys.api, task.ID, contracts.StatusRunning, 20*time.Second)
	testenv.Eventually(t, 10*time.Second, "progress shown", func() bool {
		running, err = sys.api.Get(ctx, task.ID)
		return err == nil && running.Progress != nil
	})
	require.Equal(t, 40, running.Progress.Percent)
	require.Equal(t, "copied 4 of 10 files", running.Progress.Message)
	close(seen)

	done := waitStatus(t, sys.api, task.ID, contracts.StatusSuccess, 20*time.Second)
	require.JSONEq(t, `{"files":10,"bucket":"b1"}`, string(done.Result))
	require.ErrorIs(t, <-tooBig, executor.ErrResultTooLarge)
	require.Equal(t, 40, done.Progress.Percent, "the last progress stays")

	list, err := sys.api.ListTasks(ctx, client.TaskFilter{Type: "test.report"}, 10, "")
	require.NoError(t, err)
	require.Len(t, list.Tasks, 1)
	require.Empty(t, list.Tasks[0].Result, "lists leave results out")
}

func TestReportOutsideExecutorFails(t *testing.T) {
	require.ErrorIs(t, executor.SetResult(context.Background(), 1), executor.ErrNotInExecutor)
	require.ErrorIs(t, executor.SetProgress(context.Background(), 1, ""), executor.ErrNotInExecutor)
}
