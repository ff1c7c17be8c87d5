package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestWaitingTasksArePagedOnceEach: READY and RETRYING tasks of two types,
// many sharing a due time, among tasks in other states; paging with a
// small page, ReadyPage returns every waiting task exactly once and
// nothing else, and ReadyOfType only those of its type.
func TestWaitingTasksArePagedOnceEach(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	states := []contracts.Status{contracts.StatusReady, contracts.StatusRetrying, contracts.StatusRunning, contracts.StatusSuccess}
	want := map[string]map[int64]bool{"": {}, "ax.noop": {}, "ax.sleep": {}}
	var nts []store.NewTask
	for i := range 60 {
		typ := []string{"ax.noop", "ax.sleep"}[i%2]
		nts = append(nts, store.NewTask{ID: int64(5000 + i), Type: typ, Priority: contracts.PriorityNormal,
			Status: contracts.StatusReady, NextRunTimeMs: int64(1000 + i%4), MaxRetries: 3, TimeoutMs: 1000, Reason: "test"})
	}
	_, err := st.CreateTasks(ctx, nts)
	require.NoError(t, err)
	for i, nt := range nts {
		state := states[(i/2)%len(states)]
		_, err := st.DB().ExecContext(ctx, `UPDATE tasks SET status = ? WHERE id = ?`, string(state), nt.ID)
		require.NoError(t, err)
		if state == contracts.StatusReady || state == contracts.StatusRetrying {
			want[""][nt.ID] = true
			want[nt.Type][nt.ID] = true
		}
	}

	for typ, ids := range want {
		got := map[int64]int{}
		var after *store.DueRef
		for pages := 0; ; pages++ {
			require.Less(t, pages, 100, "paging ends")
			var page []store.DueRef
			if typ == "" {
				page, err = st.ReadyPage(ctx, after, 4)
			} else {
				page, err = st.ReadyOfType(ctx, typ, after, 4)
			}
			require.NoError(t, err)
			for _, r := range page {
				got[r.ID]++
				require.True(t, ids[r.ID], "task %d (%s) is not a waiting task of %q", r.ID, r.Status, typ)
			}
			if len(page) < 4 {
				break
			}
			after = &page[len(page)-1]
		}
		require.Len(t, got, len(ids), "type %q", typ)
		for id, n := range got {
			require.Equal(t, 1, n, "task %d paged %d times", id, n)
		}
	}

	_, err = st.ReadyPage(ctx, &store.DueRef{ID: 1, Status: contracts.StatusRunning}, 4)
	require.ErrorContains(t, err, "not waiting")
}

// TestWaitingPagesFollowTheStatusIndex: a page is read in the status
// index's own order, so it stops after its rows instead of sorting every
// waiting task first.
func TestWaitingPagesFollowTheStatusIndex(t *testing.T) {
	st, _ := testenv.Store(t)
	for _, where := range []string{
		`status = 'READY' AND (next_run_time > 5 OR (next_run_time = 5 AND id > 7)) AND task_type = 'ax.noop'`,
		`status = 'RETRYING'`,
	} {
		for _, plan := range explain(t, st, `SELECT id FROM tasks FORCE INDEX (idx_tasks_status_next_run) WHERE `+
			where+` ORDER BY next_run_time, id LIMIT 10`) {
			require.Equal(t, "idx_tasks_status_next_run", plan["key"], where)
			require.False(t, strings.Contains(plan["Extra"], "filesort"), "%s: %s", where, plan["Extra"])
		}
	}
}
