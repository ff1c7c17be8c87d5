package store_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

func claim(id int64, attempt int, node string) store.TransferParams {
	return store.TransferParams{TaskID: id, From: contracts.StatusReady, To: contracts.StatusRunning,
		Attempt: &attempt, Claim: true, Executor: node, Reason: "claimed by " + node}
}

func TestTransferBatchSettlesEachChainOnItsOwn(t *testing.T) {
	ctx := context.Background()
	st, _ := testenv.Store(t)
	a, b, c, d := newTask(t, st, nil), newTask(t, st, nil), newTask(t, st, nil), newTask(t, st, nil)
	one := 1
	errText := "boom"

	out, err := st.TransferBatch(ctx, [][]store.TransferParams{
		{claim(a.ID, 0, "n1")},
		{claim(b.ID, 5, "n1")}, // stale attempt: fenced off
		{claim(c.ID, 0, "n1")},
		{claim(c.ID, 0, "n2")}, // the same task twice in one batch: the first wins
		{{TaskID: 999999, From: contracts.StatusReady, To: contracts.StatusRunning}}, // no such task
		{{TaskID: d.ID, From: contracts.StatusSuccess, To: contracts.StatusReady}},   // illegal
		// a chain of two steps on one task, seeing the row the first left
		{claim(d.ID, 0, "n1"), {TaskID: d.ID, From: contracts.StatusRunning, To: contracts.StatusFailed,
			Attempt: &one, LastError: &errText, Reason: "failed"}},
	})
	require.NoError(t, err)
	require.Len(t, out, 7)

	require.NoError(t, out[0].Err)
	require.Equal(t, 1, out[0].Results[0].Attempt)
	require.NotEmpty(t, out[0].Results[0].EventID)

	var ce *store.ConflictError
	require.ErrorAs(t, out[1].Err, &ce)
	require.True(t, ce.Fenced)
	require.Equal(t, 0, ce.ActualAttempt)

	require.NoError(t, out[2].Err)
	require.ErrorAs(t, out[3].Err, &ce)
	require.Equal(t, contracts.StatusRunning, ce.Actual, "the second claim sees the first one's write")

	require.ErrorIs(t, out[4].Err, store.ErrNotFound)
	require.ErrorIs(t, out[5].Err, store.ErrIllegalTransition)

	require.NoError(t, out[6].Err)
	require.Len(t, out[6].Results, 2)
	require.Equal(t, 1, out[6].Results[1].Attempt)

	// What MySQL holds, not what the batch said.
	for _, tc := range []struct {
		id       int64
		status   contracts.Status
		attempt  int
		executor string
		history  int
	}{
		{a.ID, contracts.StatusRunning, 1, "n1", 2},
		{b.ID, contracts.StatusReady, 0, "", 1},
		{c.ID, contracts.StatusRunning, 1, "n1", 2},
		{d.ID, contracts.StatusFailed, 1, "n1", 3},
	} {
		got, err := st.GetTask(ctx, tc.id)
		require.NoError(t, err)
		require.Equal(t, tc.status, got.Status, "task %d", tc.id)
		require.Equal(t, tc.attempt, got.Attempt, "task %d", tc.id)
		require.Equal(t, tc.executor, got.ExecutorAddr, "task %d", tc.id)
		c := countRows(t, st, tc.id)
		require.Equal(t, tc.history, c.history, "history rows of task %d", tc.id)
		require.Equal(t, tc.history, c.events, "events of task %d", tc.id)
	}
	got, err := st.GetTask(ctx, d.ID)
	require.NoError(t, err)
	require.Equal(t, errText, got.LastError)
}

func TestTransferBatchRollsBackWholeWhenAWriteFails(t *testing.T) {
	ctx := context.Background()
	st, _ := testenv.Store(t)
	a, b := newTask(t, st, nil), newTask(t, st, nil)
	failing := claim(b.ID, 0, "n1")
	failing.Also = func(context.Context, store.Execer) error { return errors.New("disk on fire") }

	_, err := st.TransferBatch(ctx, [][]store.TransferParams{{claim(a.ID, 0, "n1")}, {failing}})
	require.ErrorContains(t, err, "disk on fire")
	for _, id := range []int64{a.ID, b.ID} {
		got, err := st.GetTask(ctx, id)
		require.NoError(t, err)
		require.Equal(t, contracts.StatusReady, got.Status)
		require.Equal(t, counts{history: 1, events: 1}, countRows(t, st, id))
	}
}

// Executors racing batch claims over the same tasks, in different orders:
// every task is claimed exactly once and has exactly one RUNNING row.
func TestTransferBatchRaceClaimsEachTaskOnce(t *testing.T) {
	ctx := context.Background()
	st, _ := testenv.Store(t)
	db := st.DB()
	const tasks, racers = 200, 6
	ids := make([]int64, tasks)
	for i := range ids {
		ids[i] = newTask(t, st, nil).ID
	}
	wins := make([]int, racers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for r := range racers {
		wg.Go(func() {
			order := append([]int64(nil), ids...)
			rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			<-start
			for len(order) > 0 {
				n := min(len(order), 1+rand.IntN(40))
				chains := make([][]store.TransferParams, n)
				for i, id := range order[:n] {
					chains[i] = []store.TransferParams{claim(id, 0, "racer")}
				}
				out, err := st.TransferBatch(ctx, chains)
				if err != nil {
					t.Errorf("racer %d: %v", r, err)
					return
				}
				for _, res := range out {
					if res.Err == nil {
						wins[r]++
					} else if !errors.Is(res.Err, store.ErrConflict) {
						t.Errorf("racer %d: unexpected chain error %v", r, res.Err)
					}
				}
				order = order[n:]
			}
		})
	}
	close(start)
	wg.Wait()
	total := 0
	for _, w := range wins {
		total += w
	}
	require.Equal(t, tasks, total, "claims won across racers")
	var running, dupes int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM tasks WHERE status = 'RUNNING' AND attempt = 1`).Scan(&running))
	require.Equal(t, tasks, running)
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM (SELECT task_id FROM task_history WHERE to_status = 'RUNNING'
		GROUP BY task_id HAVING COUNT(*) <> 1) x`).Scan(&dupes))
	require.Zero(t, dupes, "tasks without exactly one RUNNING history row")
}

// TestADueGuardRefusesATaskDueLater: a transfer with DueByMs applies only
// while the task is due by then; refused, it changes nothing and says why,
// and a recorded rejection names the two times.
func TestADueGuardRefusesATaskDueLater(t *testing.T) {
	ctx := context.Background()
	st, _ := testenv.Store(t)
	onTime, moved, traced := newTask(t, st, nil), newTask(t, st, nil), newTask(t, st, nil)
	guarded := func(task *store.Task, dueBy int64, record bool) []store.TransferParams {
		p := claim(task.ID, 0, "n1")
		p.DueByMs, p.RecordRejection = &dueBy, record
		return []store.TransferParams{p}
	}
	out, err := st.TransferBatch(ctx, [][]store.TransferParams{
		guarded(onTime, onTime.NextRunTimeMs, false),  // due exactly then: applies
		guarded(moved, moved.NextRunTimeMs-1, false),  // due a millisecond later than the dispatch says
		guarded(traced, traced.NextRunTimeMs-5, true), // the same, leaving a trace
	})
	require.NoError(t, err)
	require.NoError(t, out[0].Err)
	for _, k := range []int{1, 2} {
		var ce *store.ConflictError
		require.ErrorAs(t, out[k].Err, &ce)
		require.ErrorIs(t, out[k].Err, store.ErrConflict)
		require.True(t, ce.NotDue)
		require.Contains(t, ce.Error(), "rescheduled")
	}

	for id, want := range map[int64]contracts.Status{onTime.ID: contracts.StatusRunning,
		moved.ID: contracts.StatusReady, traced.ID: contracts.StatusReady} {
		got, err := st.GetTask(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, got.Status, "task %d", id)
	}
	require.Equal(t, 1, countRows(t, st, moved.ID).history, "a refused claim writes nothing")
	hist, err := st.History(ctx, traced.ID)
	require.NoError(t, err)
	require.Len(t, hist, 2)
	require.Contains(t, hist[1].Reason, "is due at", "the rejection row names the due time")
}

// A batch of failures that retry is written in one statement for all its
// rows (updateStatements), each row keeping its own due time and error.
func TestTransferBatchKeepsEachFailuresOwnValues(t *testing.T) {
	ctx := context.Background()
	st, _ := testenv.Store(t)
	const n = 40
	one := 1
	var chains [][]store.TransferParams
	ids := make([]int64, n)
	for i := range n {
		ids[i] = newTask(t, st, nil).ID
		msg := fmt.Sprintf("boom %d", i)
		due := int64(4_000_000_000_000 + i*1_000)
		chains = append(chains, []store.TransferParams{claim(ids[i], 0, "n1"),
			{TaskID: ids[i], From: contracts.StatusRunning, To: contracts.StatusFailed, Attempt: &one, LastError: &msg, Reason: "failed"},
			{TaskID: ids[i], From: contracts.StatusFailed, To: contracts.StatusRetrying, Attempt: &one,
				ClearExecutor: true, IncrementRetry: true, NextRunTimeMs: &due, Reason: "retry"}})
	}
	out, err := st.TransferBatch(ctx, chains)
	require.NoError(t, err)
	for i, r := range out {
		require.NoError(t, r.Err, "chain %d", i)
	}
	for i, id := range ids {
		got, err := st.GetTask(ctx, id)
		require.NoError(t, err)
		require.Equal(t, contracts.StatusRetrying, got.Status, "task %d", i)
		require.Equal(t, fmt.Sprintf("boom %d", i), got.LastError, "task %d", i)
		require.Equal(t, int64(4_000_000_000_000+i*1_000), got.NextRunTimeMs, "task %d", i)
		require.Equal(t, 1, got.RetryCount, "task %d", i)
		require.Equal(t, 1, got.Attempt, "task %d", i)
		require.Empty(t, got.ExecutorAddr, "task %d", i)
	}
}
