package reaper_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/membership"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
	"github.com/axsched/ax/services/reaper"
)

// runningOn creates a task and claims it for executor, as an executor's
// claim does (attempt 1, executor_addr, a fresh heartbeat).
func runningOn(t *testing.T, st *store.Store, id int64, executor string) {
	t.Helper()
	ctx := context.Background()
	_, _, err := st.CreateTask(ctx, store.NewTask{ID: id, Type: "ax.noop", Priority: contracts.PriorityNormal,
		Status: contracts.StatusReady, NextRunTimeMs: 1, MaxRetries: 1, TimeoutMs: time.Hour.Milliseconds(), Reason: "t"})
	require.NoError(t, err)
	zero := 0
	_, err = st.Transfer(ctx, store.TransferParams{TaskID: id, From: contracts.StatusReady, To: contracts.StatusRunning,
		Attempt: &zero, Claim: true, Executor: executor, Reason: "claim"})
	require.NoError(t, err)
}

// manualClock is a clock the test moves by hand, so waits take no time.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestReaperRepairsOrphans: RUNNING tasks whose executor is not alive in the
// registry and holds no lease go back to READY once they have looked so for
// OrphanAfter — no heartbeat silence needed — while every task somebody may
// still finish is left alone, including one whose owner re-registers in the
// meantime (Redis lost the registry and the leases); the sweep pages past a
// batch of tasks it must leave alone and reports what it found in
// ax_reaper_stuck_running.
func TestReaperRepairsOrphans(t *testing.T) {
	st, _ := testenv.Store(t)
	rdb, k := testenv.Redis(t)
	ctx := context.Background()
	now := time.Now()
	beat := func(name string, at time.Time) {
		require.NoError(t, membership.Beat(ctx, rdb, k.Nodes(), contracts.Node{Name: name, LastHeartbeat: at}))
	}
	beat("live", now)
	beat("dead", now.Add(-time.Minute))

	// Tasks 1..3 lead the id order and must be left alone, so a sweep that
	// stopped at its batch of 2 would never reach the orphans behind them.
	runningOn(t, st, 1, "draining") // left the registry, still holds the lease: finishing its work
	runningOn(t, st, 2, "draining")
	runningOn(t, st, 3, "live")  // a live owner whose lease vanished: its own watchdog notices
	runningOn(t, st, 4, "ghost") // never heartbeats, no lease: orphan
	runningOn(t, st, 5, "dead")  // registered but dead, no lease: orphan
	runningOn(t, st, 6, "")      // no owner at all: orphan
	runningOn(t, st, 7, "ghost")
	runningOn(t, st, 8, "returning") // its registry entry and lease were flushed; it beats again below
	for _, id := range []int64{1, 2} {
		require.NoError(t, rdb.Set(ctx, k.Lock(id), "draining:1", time.Minute).Err())
	}
	slot := "4@ghost:1#c1"
	require.NoError(t, rdb.ZAdd(ctx, k.RunningSet("ax.noop"), redis.Z{Score: float64(now.Add(time.Minute).UnixMilli()), Member: slot}).Err())

	before := testutil.ToFloat64(metrics.ReaperStuckRepaired)
	const wait = time.Second
	clk := &manualClock{now: now}
	r := reaper.New(reaper.Config{Batch: 2, OrphanAfter: wait}, st, rdb, k, clk, testenv.Logger(t))
	found, repaired, err := r.RepairOrphans(ctx)
	require.NoError(t, err)
	require.Equal(t, 5, found, "tasks 4 to 8 look orphaned")
	require.Zero(t, repaired, "but only just")
	require.Equal(t, 5.0, testutil.ToFloat64(metrics.ReaperStuckRunning))
	for id := int64(4); id <= 8; id++ {
		require.Equal(t, contracts.StatusRunning, status(t, st, id), "task %d", id)
	}

	beat("returning", now)
	clk.advance(wait)
	found, repaired, err = r.RepairOrphans(ctx)
	require.NoError(t, err)
	require.Equal(t, 4, found)
	require.Equal(t, 4, repaired)
	require.Equal(t, 4.0, testutil.ToFloat64(metrics.ReaperStuckRunning))
	require.Equal(t, 4.0, testutil.ToFloat64(metrics.ReaperStuckRepaired)-before)

	want := map[int64]contracts.Status{1: contracts.StatusRunning, 2: contracts.StatusRunning, 3: contracts.StatusRunning,
		4: contracts.StatusReady, 5: contracts.StatusReady, 6: contracts.StatusReady, 7: contracts.StatusReady,
		8: contracts.StatusRunning}
	for id, s := range want {
		require.Equal(t, s, status(t, st, id), "task %d", id)
	}
	task, err := st.GetTask(ctx, 4)
	require.NoError(t, err)
	require.Empty(t, task.ExecutorAddr, "the orphan's owner is cleared")
	h, err := st.History(ctx, 4)
	require.NoError(t, err)
	last := h[len(h)-1]
	require.Equal(t, contracts.StatusRunning, last.From)
	require.Equal(t, contracts.StatusReady, last.To)
	require.Equal(t, 1, last.Attempt)
	require.Contains(t, last.Reason, "orphaned: executor ghost is not alive in the membership registry and holds no lease")
	require.Zero(t, rdb.ZScore(ctx, k.RunningSet("ax.noop"), slot).Val(), "the orphan's cluster-limit slot is freed")

	// Next pass: nothing left to find, and the gauge says so.
	found, repaired, err = r.RepairOrphans(ctx)
	require.NoError(t, err)
	require.Zero(t, found)
	require.Zero(t, repaired)
	require.Zero(t, testutil.ToFloat64(metrics.ReaperStuckRunning))

	// The draining node's lease lapses without an outcome (it crashed after
	// leaving the registry): now its task is an orphan too.
	require.NoError(t, rdb.Del(ctx, k.Lock(1)).Err())
	found, _, err = r.RepairOrphans(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, found)
	clk.advance(wait)
	_, repaired, err = r.RepairOrphans(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, repaired)
	require.Equal(t, contracts.StatusReady, status(t, st, 1))
	require.Equal(t, contracts.StatusRunning, status(t, st, 2))
}

// TestOrphanSweepRacingReplicas: two reapers sweep the same orphans at
// once; every orphan is repaired exactly once, with one history row.
func TestOrphanSweepRacingReplicas(t *testing.T) {
	st, _ := testenv.Store(t)
	rdb, k := testenv.Redis(t)
	ctx := context.Background()
	const n = 40
	for id := int64(1); id <= n; id++ {
		runningOn(t, st, id, "ghost-"+strconv.FormatInt(id%3, 10))
	}
	const wait = time.Second
	clk := &manualClock{now: time.Now()}
	reapers := []*reaper.Reaper{
		reaper.New(reaper.Config{Batch: 7, OrphanAfter: wait}, st.WithActor("reaper@a"), rdb, k, clk, testenv.Logger(t)),
		reaper.New(reaper.Config{Batch: 7, OrphanAfter: wait}, st.WithActor("reaper@b"), rdb, k, clk, testenv.Logger(t)),
	}
	for _, r := range reapers { // both see the orphans first
		found, repaired, err := r.RepairOrphans(ctx)
		require.NoError(t, err)
		require.Equal(t, n, found)
		require.Zero(t, repaired)
	}
	clk.advance(wait)
	var wg sync.WaitGroup
	won := make([]int, len(reapers))
	for i, r := range reapers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, repaired, err := r.RepairOrphans(ctx)
			require.NoError(t, err)
			won[i] = repaired
		}()
	}
	wg.Wait()
	require.Equal(t, n, won[0]+won[1], "each orphan repaired by exactly one replica (a: %d, b: %d)", won[0], won[1])
	for id := int64(1); id <= n; id++ {
		h, err := st.History(ctx, id)
		require.NoError(t, err)
		handBacks := 0
		for _, e := range h {
			if e.From == contracts.StatusRunning && e.To == contracts.StatusReady {
				handBacks++
			}
		}
		require.Equal(t, 1, handBacks, "task %d", id)
		require.Equal(t, contracts.StatusReady, status(t, st, id))
	}
}
