package store

import (
	"slices"
	"strings"
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

// updateStatements writes rows going the same way in one statement even
// where each row's values differ (every failed attempt's own due time and
// error), and keeps apart rows whose columns differ.
func TestUpdateStatementsFoldRowsWithTheirOwnValues(t *testing.T) {
	one := 1
	failed := func(id int64, msg string, due int64) []plannedStep {
		return []plannedStep{
			{p: TransferParams{TaskID: id, From: contracts.StatusRunning, To: contracts.StatusFailed, Attempt: &one, LastError: &msg}},
			{p: TransferParams{TaskID: id, From: contracts.StatusFailed, To: contracts.StatusRetrying, Attempt: &one,
				ClearExecutor: true, IncrementRetry: true, NextRunTimeMs: &due}},
		}
	}
	many := func(n int, f func(int) []plannedStep) []plannedStep {
		var out []plannedStep
		for i := range n {
			out = append(out, f(i)...)
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		plan  []plannedStep
		rows  []int // rows of each statement
		cases int   // CASE expressions in all statements
	}{
		{"same values", slices.Concat(failed(1, "boom", 7), failed(2, "boom", 7)), []int{2}, 0},
		{"own due times", slices.Concat(failed(1, "boom", 7), failed(2, "boom", 8), failed(3, "boom", 9)), []int{3}, 1},
		{"own due times and errors", slices.Concat(failed(1, "a", 7), failed(2, "b", 8)), []int{2}, 2},
		{"one row", failed(1, "a", 7), []int{1}, 0},
		{"at most byIDRows rows look their values up by id", many(250, func(i int) []plannedStep { return failed(int64(i), "a", int64(i)) }),
			[]int{byIDRows, byIDRows, 250 - 2*byIDRows}, 3},
		{"rows alike need no lookup", many(250, func(i int) []plannedStep { return failed(int64(i), "a", 7) }), []int{250}, 0},
		{"different columns stay apart", append(failed(1, "a", 7),
			plannedStep{p: TransferParams{TaskID: 2, From: contracts.StatusRunning, To: contracts.StatusFailed, Attempt: &one}}), []int{1, 1}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := updateStatements(tc.plan)
			var rows []int
			cases := 0
			for _, st := range got {
				rows = append(rows, st.rows)
				cases += strings.Count(st.query, "CASE id")
				require.Equal(t, strings.Count(st.query, "?"), len(st.args), "placeholders and arguments of %s", st.query)
			}
			require.ElementsMatch(t, tc.rows, rows)
			require.Equal(t, tc.cases, cases)
		})
	}
}
