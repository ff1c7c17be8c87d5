package store_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestReconcileSuspendedWalksItsWindows: many SUSPEND children wait for a
// parent that runs on, and a few among them were stranded (their parents
// ended behind the store's back). Each pass reads one window from where
// the last stopped, settles the stranded ones it found, and starts over
// after the last window: the passes of one walk settle every stranded
// child exactly once, and a pass never settles more than its limit.
func TestReconcileSuspendedWalksItsWindows(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	const limit, children = 2, 95 // windows of 20: five passes to the end
	nts := []store.NewTask{
		{ID: 1, Type: "ax.noop", Priority: contracts.PriorityNormal, Status: contracts.StatusReady, MaxRetries: 1, TimeoutMs: 1000, Reason: "t", DAG: true},
		{ID: 2, Type: "ax.noop", Priority: contracts.PriorityNormal, Status: contracts.StatusReady, MaxRetries: 1, TimeoutMs: 1000, Reason: "t", DAG: true},
	}
	stranded := map[int64]bool{}
	for i := range children {
		id := int64(100 + i)
		parent := int64(1) // runs on
		if i%9 == 4 {
			parent = 2 // ends unseen
			stranded[id] = true
		}
		nts = append(nts, store.NewTask{ID: id, Type: "ax.noop", Priority: contracts.PriorityNormal, Status: contracts.StatusSuspend,
			NextRunTimeMs: int64(1000 + i%7), MaxRetries: 1, TimeoutMs: 1000, Reason: "t", DAG: true,
			Parents: []store.Dependency{{ParentID: parent, When: contracts.WhenSuccess}}})
	}
	_, err := st.CreateTasks(ctx, nts)
	require.NoError(t, err)
	_, err = st.DB().Exec(`UPDATE tasks SET status = 'SUCCESS' WHERE id = 2`)
	require.NoError(t, err)
	_, err = st.DB().Exec(`UPDATE tasks SET updated_at = NOW(3) - INTERVAL 1 MINUTE WHERE status = 'SUSPEND'`)
	require.NoError(t, err)

	var scan store.SuspendedScan
	total, passes := 0, 0
	for {
		passes++
		require.LessOrEqual(t, passes, 3*children/(limit*store.SuspendedWindow)+3, "the walk ends")
		n, next, err := st.ReconcileSuspended(ctx, 5000, limit, scan)
		require.NoError(t, err)
		require.LessOrEqual(t, n, limit)
		total += n
		if next == (store.SuspendedScan{}) {
			break
		}
		require.NotEqual(t, scan, next, "a pass moves on")
		scan = next
	}
	require.Equal(t, len(stranded), total)
	for id := range stranded {
		require.Equal(t, contracts.StatusReady, status(t, st, id), "task %d", id)
	}
	var waiting int
	require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM tasks WHERE status = 'SUSPEND'`).Scan(&waiting))
	require.Equal(t, children-len(stranded), waiting, "the children of the running parent wait on")

	n, next, err := st.ReconcileSuspended(ctx, 5000, children, store.SuspendedScan{})
	require.NoError(t, err)
	require.Zero(t, n, "settled once")
	require.Equal(t, store.SuspendedScan{}, next, "one window reads them all")
}

// TestReconcilersFollowTheStatusIndex: the reconcilers' reads go through
// the status index in its own order, never walking a whole index or table
// (the SUSPEND search walked the primary key, finished tasks included;
// the stale READY search sorted every due task for each page).
func TestReconcilersFollowTheStatusIndex(t *testing.T) {
	st, _ := testenv.Store(t)
	for name, q := range map[string]struct {
		sql  string
		args []any
	}{
		"suspended": {store.SuspendedSQL, []any{5000, "SUCCESS", "FAILED", "TIMEOUT", "CANCELLED", -1, -1, 0, 100}},
		"stale":     {store.StaleReadySQL, []any{"READY", 5000, -1, -1, 0, 1000, 100}},
	} {
		seen := false
		for _, row := range explain(t, st, q.sql, q.args...) {
			if row["table"] == "tasks" {
				seen = true
				require.Equal(t, "idx_tasks_status_next_run", row["key"], "%s: %v", name, row)
				require.NotContains(t, row["Extra"], "filesort", "%s: %v", name, row)
			}
			if row["table"] == "tasks" || row["table"] == "p" {
				require.NotContains(t, []string{"ALL", "index"}, row["type"], "%s: no walk of a whole index or table: %v", name, row)
			}
		}
		require.True(t, seen, "%s reads tasks", name)
	}
}

// explain is MySQL's plan of q, a map of column to value per row.
func explain(t *testing.T, st *store.Store, q string, args ...any) []map[string]string {
	t.Helper()
	rows, err := st.DB().Query(`EXPLAIN `+q, args...)
	require.NoError(t, err)
	defer rows.Close()
	cols, err := rows.Columns()
	require.NoError(t, err)
	var out []map[string]string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		require.NoError(t, rows.Scan(ptrs...))
		plan := map[string]string{}
		for i, c := range cols {
			plan[c] = fmt.Sprintf("%s", vals[i])
		}
		out = append(out, plan)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestStaleReadyPagesEachStateInTurn: READY then RETRYING tasks due before
// the horizon and untouched for longer than the grace come back once each,
// page after page, in the status index's order; recent, not yet due and
// paused ones, and other states, never do.
func TestStaleReadyPagesEachStateInTurn(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	_, err := st.DB().Exec(`INSERT INTO task_types (name, paused) VALUES ('ax.paused', 1)`)
	require.NoError(t, err)
	var nts []store.NewTask
	for i := range 40 {
		typ := "ax.noop"
		if i%10 == 3 {
			typ = "ax.paused"
		}
		nts = append(nts, store.NewTask{ID: int64(7000 + i), Type: typ, Priority: contracts.PriorityNormal,
			Status: contracts.StatusReady, NextRunTimeMs: int64(1000 + i%5), MaxRetries: 3, TimeoutMs: 1000, Reason: "test"})
	}
	_, err = st.CreateTasks(ctx, nts)
	require.NoError(t, err)
	var want []store.DueRef
	for i, nt := range nts {
		state, age, due := contracts.StatusReady, "1 MINUTE", nt.NextRunTimeMs
		switch i % 8 {
		case 1, 2:
			state = contracts.StatusRetrying
		case 5:
			age = "0 SECOND" // touched just now
		case 6:
			due = 1 << 50 // not due before the horizon
		case 7:
			state = contracts.StatusRunning
		}
		_, err := st.DB().Exec(`UPDATE tasks SET status = ?, next_run_time = ?, updated_at = NOW(3) - INTERVAL `+age+` WHERE id = ?`,
			string(state), due, nt.ID)
		require.NoError(t, err)
		if nt.Type == "ax.noop" && age != "0 SECOND" && due < 1<<50 && state != contracts.StatusRunning {
			want = append(want, store.DueRef{ID: nt.ID, Status: state, NextRunTimeMs: due})
		}
	}
	slices.SortFunc(want, func(a, b store.DueRef) int {
		return cmp.Or(cmp.Compare(a.Status, b.Status), // READY before RETRYING
			cmp.Compare(a.NextRunTimeMs, b.NextRunTimeMs), cmp.Compare(a.ID, b.ID))
	})

	var got []store.DueRef
	var after *store.DueRef
	for pages := 0; ; pages++ {
		require.Less(t, pages, 100, "paging ends")
		page, err := st.StaleReady(ctx, 1<<49, 10*time.Second, after, 4)
		require.NoError(t, err)
		got = append(got, page...)
		if len(page) < 4 {
			break
		}
		after = &page[len(page)-1]
	}
	require.Len(t, got, len(want))
	for i := range want {
		require.Equal(t, want[i].ID, got[i].ID, "place %d", i)
		require.Equal(t, want[i].Status, got[i].Status, "task %d", want[i].ID)
	}
	_, err = st.StaleReady(ctx, 1<<49, 0, &store.DueRef{ID: 1, Status: contracts.StatusRunning}, 4)
	require.ErrorContains(t, err, "not waiting")
}
