package app_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/app"
	"github.com/axsched/ax/services/internal/route"
	"github.com/axsched/ax/services/internal/testenv"
)

var schedulerOnly = []app.Service{app.Submitter, app.Timer, app.Dispatcher, app.Reaper}

// claimFirst turns fused claims off (Config.ClaimAfter).
const claimFirst time.Duration = -1

// runningOrder returns task IDs in the order they were claimed, with each
// task's priority, read from the RUNNING history rows. Those rows are in
// claim order only when claims are written before their handlers start
// (claimFirst): a fused claim is written with its outcome, in the order
// the runs end. The order in which tasks are taken is the fetcher's
// either way.
func (s *system) runningOrder(t *testing.T) ([]int64, map[int64]contracts.Priority) {
	t.Helper()
	rows, err := s.db.Query(`SELECT h.task_id, t.priority FROM task_history h JOIN tasks t ON t.id = h.task_id
		WHERE h.to_status = 'RUNNING' ORDER BY h.id`)
	require.NoError(t, err)
	defer rows.Close()
	var order []int64
	prio := map[int64]contracts.Priority{}
	for rows.Next() {
		var id int64
		var rank int
		require.NoError(t, rows.Scan(&id, &rank))
		order = append(order, id)
		prio[id] = contracts.PriorityFromRank(rank)
	}
	return order, prio
}

func (s *system) count(t *testing.T, where string) int {
	t.Helper()
	var n int
	require.NoError(t, s.db.QueryRow(`SELECT COUNT(*) FROM tasks WHERE `+where).Scan(&n))
	return n
}

// TestLanesServedInPriorityOrder: 300 tasks become due at once while no
// executor runs; when one starts, every high task starts before any normal
// task and every normal before any low.
func TestLanesServedInPriorityOrder(t *testing.T) {
	rdb, k := testenv.Redis(t)
	sys := startSystemWith(t, schedulerOnly, "127.0.0.1:6379", k.Prefix, nil)
	sched := sys
	// The executor that will serve the type has registered it before.
	_, err := sys.db.Exec(`INSERT INTO task_types (name) VALUES ('ax.noop')`)
	require.NoError(t, err)

	// Interleave lanes so submission order says nothing about priority.
	var wg sync.WaitGroup
	for i := range 100 {
		for _, p := range []contracts.Priority{contracts.PriorityLow, contracts.PriorityNormal, contracts.PriorityHigh} {
			wg.Go(func() {
				_, err := sched.api.Submit(context.Background(), contracts.SubmitRequest{Type: "ax.noop", Priority: string(p)})
				if err != nil {
					t.Errorf("submit %d %s: %v", i, p, err)
				}
			})
		}
		wg.Wait()
	}
	testenv.Eventually(t, 30*time.Second, "300 tasks dispatched", func() bool {
		n, err := rdb.ZCard(context.Background(), k.Dispatched()).Result()
		return err == nil && n == 300
	})

	sys.join(t, []app.Service{app.Executor}, func(c *app.Config) {
		c.Node = "late-executor"
		c.Executor.Fetchers = 1
		c.Executor.ClaimAfter = claimFirst
	})
	testenv.Eventually(t, 60*time.Second, "300 tasks SUCCESS", func() bool {
		return sys.count(t, "status = 'SUCCESS'") == 300
	})
	order, prio := sys.runningOrder(t)
	require.Len(t, order, 300)
	for i := 1; i < len(order); i++ {
		require.LessOrEqual(t, prio[order[i-1]].Rank(), prio[order[i]].Rank(),
			"claim %d (%s) came after claim %d (%s)", i, prio[order[i]], i-1, prio[order[i-1]])
	}
}

// TestLowTasksAreNotStarved: a flood of high tasks saturates a small
// executor; low tasks submitted first still start long before the flood
// drains, because after two aging periods they rank with high work and are
// older than it.
func TestLowTasksAreNotStarved(t *testing.T) {
	_, k := testenv.Redis(t)
	const aging = 400 * time.Millisecond
	sys := startSystem(t, "127.0.0.1:6379", k.Prefix, func(c *app.Config) {
		c.Executor.Fetchers = 1
		c.Executor.AgingAfter = aging
		for i := range c.Types {
			c.Types[i].Concurrency = 2
		}
	})
	ctx := context.Background()
	submitted := time.Now()
	var lows []string
	for range 3 {
		task, err := sys.api.Submit(ctx, contracts.SubmitRequest{Type: "ax.sleep", Priority: "low", Payload: json.RawMessage(`{"ms":1}`)})
		require.NoError(t, err)
		lows = append(lows, task.ID)
	}
	// 300 × 40 ms on 2 workers is about 6 s of high work, submitted faster
	// than it drains.
	submitMany(t, sys.api, 300, 8, contracts.SubmitRequest{Type: "ax.sleep", Priority: "high", Payload: json.RawMessage(`{"ms":40}`)})
	testenv.Eventually(t, 120*time.Second, "all tasks SUCCESS", func() bool {
		return sys.count(t, "status = 'SUCCESS'") == 303
	})

	var lastHighStart time.Time
	require.NoError(t, sys.db.QueryRow(`SELECT MAX(h.created_at) FROM task_history h JOIN tasks t ON t.id = h.task_id
		WHERE h.to_status = 'RUNNING' AND t.priority = 0`).Scan(&lastHighStart))
	for _, id := range lows {
		h, err := sys.api.History(ctx, id)
		require.NoError(t, err)
		require.Equal(t, contracts.StatusRunning, h.History[1].To)
		started := h.History[1].At
		waited := started.Sub(submitted)
		t.Logf("low task %s started %s after submission (aging %s); the high flood ran until %s after",
			id, waited.Round(time.Millisecond), aging, lastHighStart.Sub(submitted).Round(time.Millisecond))
		require.True(t, started.Before(lastHighStart), "low task %s waited for the whole high flood", id)
		// Relative, not wall-clock: without aging a low task would start
		// at the very end of the flood; with it, early in the flood.
		require.Less(t, waited, lastHighStart.Sub(submitted)/2, "low task %s started too late", id)
	}
}

// TestSkewedLocalClockStartsNothingEarly runs the timer, dispatcher and
// executor on a node whose local clock is 5 s fast; the Redis clock keeps
// every task from starting before its due time.
func TestSkewedLocalClockStartsNothingEarly(t *testing.T) {
	_, k := testenv.Redis(t)
	sys := startSystemWith(t, []app.Service{app.Submitter}, "127.0.0.1:6379", k.Prefix, nil)
	front := sys
	sys.join(t, []app.Service{app.Timer, app.Dispatcher, app.Executor, app.Reaper}, func(c *app.Config) {
		c.Node = "fast-clock"
		c.LocalClock = func() time.Time { return time.Now().Add(5 * time.Second) }
	})

	const n = 100
	submitMany(t, front.api, n, 8, contracts.SubmitRequest{Type: "ax.noop", Delay: "2s"})
	testenv.Eventually(t, 60*time.Second, "all tasks SUCCESS", func() bool {
		return sys.count(t, "status = 'SUCCESS'") == n
	})
	var early, minLateMs, maxLateMs int64
	require.NoError(t, sys.db.QueryRow(`SELECT
			COALESCE(SUM(d.late_ms < 0), 0), COALESCE(MIN(d.late_ms), 0), COALESCE(MAX(d.late_ms), 0)
		FROM (SELECT TIMESTAMPDIFF(MICROSECOND, '1970-01-01', h.created_at) DIV 1000 - t.next_run_time AS late_ms
			FROM task_history h JOIN tasks t ON t.id = h.task_id WHERE h.to_status = 'RUNNING') d`).
		Scan(&early, &minLateMs, &maxLateMs))
	t.Logf("start minus due time with a local clock 5 s fast: min %d ms, max %d ms", minLateMs, maxLateMs)
	require.Zero(t, early, "tasks started before their due time")
}

// TestClusterConcurrencyLimit runs two executors with 10 workers each for a
// type limited to 3: never more than 3 of its tasks are RUNNING.
func TestClusterConcurrencyLimit(t *testing.T) {
	_, k := testenv.Redis(t)
	sys := startSystem(t, "127.0.0.1:6379", k.Prefix, func(c *app.Config) {
		for i := range c.Types {
			c.Types[i].Concurrency = 10
		}
	})
	_, err := sys.db.Exec(`UPDATE task_types SET concurrency = 3 WHERE name = 'ax.sleep'`)
	require.NoError(t, err)
	sys.join(t, []app.Service{app.Executor}, func(c *app.Config) {
		c.Node = "second-executor"
		for i := range c.Types {
			c.Types[i].Concurrency = 10
		}
	})
	sys.expireTypeCaches()
	// Tasks are routed to the executors the routers know: wait for the
	// registry to list the second one, then for every router to re-read
	// it, or all of them may go to the first.
	testenv.Eventually(t, 30*time.Second, "both executors registered", func() bool {
		nodes, err := sys.api.ListNodes(context.Background())
		require.NoError(t, err)
		alive := 0
		for _, n := range nodes.Nodes {
			if n.Alive && (n.Name == "e2e" || n.Name == "second-executor") {
				alive++
			}
		}
		return alive == 2
	})
	time.Sleep(route.RefreshInterval + 500*time.Millisecond)

	const n = 30
	submitMany(t, sys.api, n, 8, contracts.SubmitRequest{Type: "ax.sleep", Payload: json.RawMessage(`{"ms":150}`)})
	maxRunning := 0
	executors := map[string]bool{}
	testenv.Eventually(t, 60*time.Second, "all tasks SUCCESS", func() bool {
		maxRunning = max(maxRunning, sys.count(t, "status = 'RUNNING'"))
		return sys.count(t, "status = 'SUCCESS'") == n
	})
	rows, err := sys.db.Query(`SELECT DISTINCT executor_addr FROM tasks`)
	require.NoError(t, err)
	for rows.Next() {
		var e string
		require.NoError(t, rows.Scan(&e))
		executors[e] = true
	}
	rows.Close()
	t.Logf("most RUNNING at once: %d; executors used: %v", maxRunning, executors)
	require.LessOrEqual(t, maxRunning, 3)
	require.Len(t, executors, 2, "both executors should have run tasks")
}

// TestCancelRunningTaskStopsItsHandler: cancelling a RUNNING task ends it
// CANCELLED at once and cancels the handler's context, which frees the only
// worker for the next task long before the cancelled one would have ended.
func TestCancelRunningTaskStopsItsHandler(t *testing.T) {
	_, k := testenv.Redis(t)
	sys := startSystem(t, "127.0.0.1:6379", k.Prefix, func(c *app.Config) {
		for i := range c.Types {
			c.Types[i].Concurrency = 1
		}
		c.Executor.Fetchers = 1
	})
	ctx := context.Background()
	long, err := sys.api.Submit(ctx, contracts.SubmitRequest{Type: "ax.sleep", Payload: json.RawMessage(`{"ms":30000}`)})
	require.NoError(t, err)
	testenv.Eventually(t, 10*time.Second, "long task RUNNING", func() bool {
		task, err := sys.api.Get(ctx, long.ID)
		return err == nil && task.Status == contracts.StatusRunning
	})
	next, err := sys.api.Submit(ctx, contracts.SubmitRequest{Type: "ax.sleep", Payload: json.RawMessage(`{"ms":1}`)})
	require.NoError(t, err)

	cancelled, err := sys.api.Cancel(ctx, long.ID)
	require.NoError(t, err)
	require.Equal(t, contracts.StatusCancelled, cancelled.Status)
	start := time.Now()
	testenv.Eventually(t, 10*time.Second, "next task SUCCESS on the freed worker", func() bool {
		task, err := sys.api.Get(ctx, next.ID)
		return err == nil && task.Status == contracts.StatusSuccess
	})
	t.Logf("the queued task ran %s after the cancel", time.Since(start).Round(time.Millisecond))

	h, err := sys.api.History(ctx, long.ID)
	require.NoError(t, err)
	require.Len(t, h.History, 3, "READY, RUNNING, CANCELLED and nothing after")
	require.Equal(t, contracts.StatusCancelled, h.History[2].To)
	require.Equal(t, contracts.StatusRunning, h.History[2].From)
}

// TestPausedTypeWaitsAndResumesInOrder: tasks of a paused type wait READY
// (nothing lost, nothing run); on resume they run, lane by lane.
func TestPausedTypeWaitsAndResumesInOrder(t *testing.T) {
	_, k := testenv.Redis(t)
	sys := startSystem(t, "127.0.0.1:6379", k.Prefix, func(c *app.Config) {
		c.Executor.Fetchers = 1
		// One dispatcher consumer hands the re-indexed tasks on in the order
		// the timer popped them (lane order), so the idle executor cannot
		// see a low task before the high ones are published.
		c.Dispatcher.Consumers = 1
		c.Executor.ClaimAfter = claimFirst
	})
	ctx := context.Background()
	yes, no := true, false
	_, err := sys.api.UpdateType(ctx, "ax.noop", contracts.TaskTypeUpdate{Paused: &yes})
	require.NoError(t, err)
	sys.expireTypeCaches()

	for _, p := range []string{"low", "normal", "high"} {
		submitMany(t, sys.api, 20, 4, contracts.SubmitRequest{Type: "ax.noop", Priority: p})
	}
	time.Sleep(3 * time.Second)
	require.Equal(t, 60, sys.count(t, "status = 'READY'"), "a paused type's tasks must wait")

	_, err = sys.api.UpdateType(ctx, "ax.noop", contracts.TaskTypeUpdate{Paused: &no})
	require.NoError(t, err)
	testenv.Eventually(t, 30*time.Second, "all tasks SUCCESS after resume", func() bool {
		return sys.count(t, "status = 'SUCCESS'") == 60
	})
	order, prio := sys.runningOrder(t)
	require.Len(t, order, 60)
	for i := 1; i < len(order); i++ {
		require.LessOrEqual(t, prio[order[i-1]].Rank(), prio[order[i]].Rank(), "claim %d out of lane order", i)
	}
}
