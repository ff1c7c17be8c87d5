package executor

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/membership"
	"github.com/axsched/ax/services/internal/testenv"
)

// sendBatch stores READY tasks ids and sends their lean dispatches in one
// message (events.TaskDispatches) on the type's shared normal lane, as a
// relay dispatching a pass's tasks would.
func (g *faultRig) sendBatch(t *testing.T, ids ...int64) {
	t.Helper()
	var b events.TaskDispatches
	for _, id := range ids {
		now := g.ready(t, id)
		b.Tasks = append(b.Tasks, events.TaskDispatched{TaskID: id, Type: g.typ, NextRunTimeMs: now, Load: true})
	}
	data, err := events.Encode(b)
	require.NoError(t, err)
	g.publishMsgs(t, bus.Msg{Subject: events.ExecSubject(g.typ, contracts.PriorityNormal, events.SharedToken),
		EventType: events.TypeTaskDispatches, Data: data})
}

// runCounter is a handler that counts the runs of each task.
type runCounter struct {
	mu   sync.Mutex
	runs map[int64]int
}

func (c *runCounter) Handle(_ context.Context, task *Task) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.runs == nil {
		c.runs = map[int64]int{}
	}
	c.runs[task.ID]++
	return nil
}

func (c *runCounter) count(id int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[id]
}

// requireOnce checks that every task of ids ran once, SUCCESS, and that the
// shared lane holds nothing, delivered or not.
func (g *faultRig) requireOnce(t *testing.T, c *runCounter, ids ...int64) {
	t.Helper()
	for _, id := range ids {
		require.Equal(t, 1, c.count(id), "task %d runs", id)
		require.Equal(t, "READY>RUNNING>SUCCESS", g.history(t, id), "task %d", id)
	}
	conn, err := bus.Connect(context.Background(), g.url, "test-inspector")
	require.NoError(t, err)
	defer conn.Close()
	testenv.Eventually(t, 10*time.Second, "the batch acknowledged", func() bool {
		info, err := conn.JS.Consumer(context.Background(), events.StreamWork,
			events.ExecConsumer(g.typ, contracts.PriorityNormal, events.SharedToken))
		require.NoError(t, err)
		ci, err := info.Info(context.Background())
		require.NoError(t, err)
		return ci.NumAckPending == 0 && ci.NumPending == 0
	})
}

// One task of a batch whose claim must wait (its lease held by a live
// node's claim in flight) hands the whole message back: the batch comes
// again, its other tasks lose their repeated claims, and the held task runs
// once the lease is gone. Every task runs once.
func TestABatchWithATaskHandedBackRunsEveryTaskOnce(t *testing.T) {
	rdb, k := testenv.Redis(t)
	g := newFaultRig(t, "127.0.0.1:6379", k, "test.batchback")
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	// A live node claiming task 3's next attempt, as far as Redis says.
	beat := func() {
		now := time.Now()
		require.NoError(t, membership.Beat(ctx, rdb, k.Nodes(), contracts.Node{Name: "ghost", StartedAt: now, LastHeartbeat: now, Alive: true}))
	}
	beat()
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				_ = membership.Beat(ctx, rdb, k.Nodes(), contracts.Node{Name: "ghost", LastHeartbeat: time.Now(), Alive: true})
			}
		}
	}()
	require.NoError(t, rdb.Set(ctx, k.Lock(3), "ghost:1", g.typTO).Err())

	c := &runCounter{}
	g.executor(t, "live", Config{}, c, nil)
	ids := []int64{1, 2, 3, 4, 5, 6, 7, 8}
	g.sendBatch(t, ids...)
	for _, id := range ids {
		if id == 3 {
			continue
		}
		testenv.Eventually(t, 20*time.Second, "the batch's free tasks run", func() bool {
			return g.history(t, id) == "READY>RUNNING>SUCCESS"
		})
	}
	// The batch comes back every second or so while the lease is held.
	time.Sleep(2500 * time.Millisecond)
	require.Zero(t, c.count(3), "the held task waits")
	require.Equal(t, "READY", g.history(t, 3))
	require.NoError(t, rdb.Del(ctx, k.Lock(3)).Err())
	testenv.Eventually(t, 20*time.Second, "the held task runs once its lease is gone", func() bool {
		return g.history(t, 3) == "READY>RUNNING>SUCCESS"
	})
	g.requireOnce(t, c, ids...)
}

// An executor killed while it holds a batch (some of its tasks running
// inside the fused-claim window, the rest waiting for a slot) leaves the
// message unacknowledged: it comes back after the ack wait, whole, and the
// survivor runs every task, taking over the dead node's leases of the ones
// that had started. None is lost, none runs twice to completion.
func TestAnExecutorKilledHoldingABatchLosesNoTask(t *testing.T) {
	_, _, g := windowRig(t, "test.batchkill")
	started := make(chan int64, 8)
	never := make(chan struct{})
	defer close(never)
	_, kill := g.executor(t, "victim", Config{ShutdownTimeout: 100 * time.Millisecond}, held(started, never, nil), nil)
	ids := []int64{1, 2, 3, 4, 5, 6, 7, 8}
	g.sendBatch(t, ids...)
	for range 4 { // the pool's size
		awaitStart(t, started)
	}
	kill()
	g.window = 0
	c := &runCounter{}
	g.executor(t, "survivor", Config{}, c, nil)
	for _, id := range ids {
		testenv.Eventually(t, 60*time.Second, "every task SUCCESS on the survivor", func() bool {
			return g.history(t, id) == "READY>RUNNING>SUCCESS"
		})
		task, err := g.st.GetTask(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, "survivor", task.ExecutorAddr)
	}
	g.requireOnce(t, c, ids...)
}
