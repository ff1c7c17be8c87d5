package store

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
)

// rowUpdates writes each row once where one statement can: a row's steps
// merge from the first's state to the last's, a later step's value of a
// column replaces an earlier one's, and a step that reads a column an
// earlier step changed starts the row's next update.
func TestRowUpdates(t *testing.T) {
	one, msg, next := 1, "boom", int64(99)
	claim := func(id int64) plannedStep {
		return plannedStep{p: TransferParams{TaskID: id, From: contracts.StatusReady, To: contracts.StatusRunning, Claim: true, Executor: "n1"}}
	}
	success := func(id int64) plannedStep {
		return plannedStep{p: TransferParams{TaskID: id, From: contracts.StatusRunning, To: contracts.StatusSuccess, Attempt: &one}}
	}
	retrying := func(id int64) plannedStep {
		return plannedStep{p: TransferParams{TaskID: id, From: contracts.StatusRunning, To: contracts.StatusRetrying, Attempt: &one,
			ClearExecutor: true, IncrementRetry: true, LastError: &msg, NextRunTimeMs: &next}}
	}
	type want struct {
		id       int64
		from, to contracts.Status
		layer    int
		set      string
		args     []any
	}
	claimSet := "updated_at = NOW(3), attempt = attempt + 1, executor_addr = ?, last_heartbeat_time = NOW(3), started_at = NOW(3), progress_pct = NULL, progress_message = NULL, progress_at = NULL"
	for _, tc := range []struct {
		name string
		plan []plannedStep
		want []want
	}{
		{"a fused claim and its success are one update", []plannedStep{claim(1), success(1)},
			[]want{{1, contracts.StatusReady, contracts.StatusSuccess, 0, claimSet, []any{"n1"}}}},
		{"a later value replaces an earlier one", []plannedStep{claim(1), retrying(1)},
			[]want{{1, contracts.StatusReady, contracts.StatusRetrying, 0,
				"updated_at = NOW(3), attempt = attempt + 1, executor_addr = NULL, last_heartbeat_time = NULL, started_at = NOW(3), progress_pct = NULL, progress_message = NULL, progress_at = NULL, retry_count = retry_count + 1, last_error = ?, next_run_time = ?",
				[]any{"boom", int64(99)}}}},
		{"a second claim of the row reads the attempt the first set", []plannedStep{claim(1),
			{p: TransferParams{TaskID: 1, From: contracts.StatusRunning, To: contracts.StatusReady, ClearExecutor: true}}, claim(1)},
			[]want{
				{1, contracts.StatusReady, contracts.StatusReady, 0,
					"updated_at = NOW(3), attempt = attempt + 1, executor_addr = NULL, last_heartbeat_time = NULL, started_at = NOW(3), progress_pct = NULL, progress_message = NULL, progress_at = NULL", nil},
				{1, contracts.StatusReady, contracts.StatusRunning, 1, claimSet, []any{"n1"}},
			}},
		{"rows stay apart", []plannedStep{claim(1), claim(2), success(1)},
			[]want{{1, contracts.StatusReady, contracts.StatusSuccess, 0, claimSet, []any{"n1"}},
				{2, contracts.StatusReady, contracts.StatusRunning, 0, claimSet, []any{"n1"}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := rowUpdates(tc.plan)
			require.Len(t, got, len(tc.want))
			for i, w := range tc.want {
				g := got[i]
				require.Equal(t, w, want{g.id, g.from, g.to, g.layer, g.set, g.args}, "update %d", i)
			}
		})
	}
}
