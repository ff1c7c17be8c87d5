package executor_test

import (
	"context"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/executor"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// run runs e until stop is called and waits until it takes work; done
// receives what Run returned.
func run(t *testing.T, e *executor.Executor) (stop func(), done chan error) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done = make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	select {
	case <-e.Ready():
	case err := <-done:
		stop()
		t.Fatalf("executor stopped: %v", err)
	case <-time.After(10 * time.Second):
		stop()
		t.Fatal("executor not ready")
	}
	return stop, done
}

// TestStoppingExecutorHandsBackWhatItsFeedHeld: an executor with one
// worker, busy, is sent ten more tasks on its own subject; its long-lived
// pull delivers them to it (nine held, unacknowledged, in the feed). When it
// stops, those nine are due commands again at once — handed back to
// JetStream and moved, not left to wait out their acknowledgement deadline
// — and its own consumer is gone. Sent as one message of ten dispatches
// (events.TaskDispatches), the nine come back at once too, not when the
// running task that shares their message is done.
func TestStoppingExecutorHandsBackWhatItsFeedHeld(t *testing.T) {
	for _, batched := range []bool{false, true} {
		t.Run(map[bool]string{false: "one message each", true: "one message"}[batched], func(t *testing.T) {
			stopHandsBack(t, batched)
		})
	}
}

func stopHandsBack(t *testing.T, batched bool) {
	st, _ := testenv.Store(t)
	rdb, k := testenv.Redis(t)
	conn := testenv.NATS(t)
	ctx := context.Background()
	const (
		typ  = "test.feed"
		node = "feed-node"
		n    = 10
	)
	started := make(chan int64, n)
	block := executor.HandlerFunc(func(ctx context.Context, task *executor.Task) error {
		started <- task.ID
		<-ctx.Done()
		return ctx.Err()
	})
	e, err := executor.New(executor.Config{Node: node, ShutdownTimeout: 200 * time.Millisecond}, st, rdb, k, conn,
		clock.System{}, testenv.Logger(t), []executor.TypeSpec{{Name: typ, Handler: block, Concurrency: 1, Timeout: time.Minute}})
	require.NoError(t, err)
	stop, done := run(t, e)
	defer stop()

	var msgs []bus.Msg
	for id := int64(1); id <= n; id++ {
		msgs = append(msgs, routed(t, st, typ, node, id))
	}
	held := n - 1 // messages the feed holds unacknowledged
	if batched {
		var b events.TaskDispatches
		for _, m := range msgs {
			var d events.TaskDispatched
			require.NoError(t, events.Decode(m.Data, &d))
			b.Tasks = append(b.Tasks, d)
		}
		data, err := events.Encode(b)
		require.NoError(t, err)
		msgs = []bus.Msg{{Subject: msgs[0].Subject, EventType: events.TypeTaskDispatches, Data: data}}
		held = 1
	}
	require.NoError(t, bus.PublishBatch(ctx, conn.JS, msgs))

	var first int64
	select {
	case first = <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("no task started")
	}
	own, err := conn.JS.Consumer(ctx, events.StreamWork, events.ExecConsumer(typ, contracts.PriorityNormal, events.NodeToken(node)))
	require.NoError(t, err)
	testenv.Eventually(t, 10*time.Second, "the other nine delivered to the executor", func() bool {
		info, err := own.Info(ctx)
		return err == nil && info.NumPending == 0 && info.NumAckPending == held
	})

	stop()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("executor did not stop")
	}
	_, err = conn.JS.Consumer(ctx, events.StreamWork, events.ExecConsumer(typ, contracts.PriorityNormal, events.NodeToken(node)))
	require.ErrorIs(t, err, jetstream.ErrConsumerNotFound, "the node's own consumer is deleted")

	var moved []int
	for _, m := range testenv.DrainWork(t, conn, events.SubjectDue) {
		var due events.TaskDue
		require.NoError(t, events.Decode(m.Data(), &due))
		moved = append(moved, int(due.TaskID))
	}
	sort.Ints(moved)
	var want []int
	for id := 1; id <= n; id++ {
		if int64(id) != first {
			want = append(want, id)
		}
	}
	require.Equal(t, want, moved, "every task the feed held is a due command again")
	task, err := st.GetTask(ctx, first)
	require.NoError(t, err)
	require.Equal(t, contracts.StatusReady, task.Status, "the running task was handed back at the shutdown timeout")
}

// reporting runs an executor on node serving typ whose handler reports
// each task it starts.
func reporting(t *testing.T, st *store.Store, rdb *redis.Client, k keys.Keys, conn *bus.Conn, typ, node string) <-chan int64 {
	t.Helper()
	started := make(chan int64, 8)
	e, err := executor.New(executor.Config{Node: node}, st, rdb, k, conn, clock.System{}, testenv.Logger(t),
		[]executor.TypeSpec{{Name: typ, Concurrency: 4, Timeout: time.Minute,
			Handler: executor.HandlerFunc(func(_ context.Context, task *executor.Task) error {
				started <- task.ID
				return nil
			})}})
	require.NoError(t, err)
	stop, done := run(t, e)
	t.Cleanup(func() { stop(); <-done })
	return started
}

// routed stores READY task id and returns its lean dispatch to node's own
// normal lane, as a relay or timer would send it.
func routed(t *testing.T, st *store.Store, typ, node string, id int64) bus.Msg {
	t.Helper()
	now := time.Now().UnixMilli()
	_, _, err := st.CreateTask(context.Background(), store.NewTask{ID: id, Type: typ, Priority: contracts.PriorityNormal,
		Status: contracts.StatusReady, NextRunTimeMs: now, MaxRetries: 3, TimeoutMs: time.Minute.Milliseconds(),
		Reason: "test", Route: events.RouteDispatched})
	require.NoError(t, err)
	data, err := events.Encode(events.TaskDispatched{TaskID: id, Type: typ, NextRunTimeMs: now, Load: true})
	require.NoError(t, err)
	return bus.Msg{Subject: events.ExecSubject(typ, contracts.PriorityNormal, events.NodeToken(node)),
		EventType: events.TypeTaskDispatched, CorrelationID: strconv.FormatInt(id, 10), Data: data}
}

// routeTo sends routed(id) over a connection of its own, as another
// process would.
func routeTo(t *testing.T, st *store.Store, url, typ, node string, id int64) {
	t.Helper()
	pub, err := bus.Connect(context.Background(), url, "test-publisher")
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, bus.PublishBatch(context.Background(), pub.JS, []bus.Msg{routed(t, st, typ, node, id)}))
}

// ran waits for started to report task id.
func ran(t *testing.T, started <-chan int64, id int64, what string) {
	t.Helper()
	select {
	case got := <-started:
		require.Equal(t, id, got)
	case <-time.After(20 * time.Second):
		t.Fatalf("task %d did not run %s", id, what)
	}
}

// TestOwnLaneConsumerDeletedIsDeclaredAgain: when the consumer of one of
// the node's own lanes is deleted under a running executor (a stream
// re-created after a loss, an operator), the executor declares it again
// and restarts its long-lived pull, so work routed to the node still runs.
func TestOwnLaneConsumerDeletedIsDeclaredAgain(t *testing.T) {
	st, _ := testenv.Store(t)
	rdb, k := testenv.Redis(t)
	conn := testenv.NATS(t)
	const typ, node = "test.revive", "revive-node"
	started := reporting(t, st, rdb, k, conn, typ, node)

	name := events.ExecConsumer(typ, contracts.PriorityNormal, events.NodeToken(node))
	require.NoError(t, conn.JS.DeleteConsumer(context.Background(), events.StreamWork, name))
	routeTo(t, st, conn.URL, typ, node, 1)
	ran(t, started, 1, "after its lane's consumer was deleted")
	_, err := conn.JS.Consumer(context.Background(), events.StreamWork, name)
	require.NoError(t, err, "the consumer is declared again")
}

// TestExecutorTakesWorkAfterNATSRestarts: the NATS server an executor
// pulls from restarts (same store); the executor reconnects on its own and
// its own lanes' long-lived pulls resume, so a task routed to it afterwards
// runs.
func TestExecutorTakesWorkAfterNATSRestarts(t *testing.T) {
	st, _ := testenv.Store(t)
	rdb, k := testenv.Redis(t)
	srv, conn := testenv.NATSServer(t)
	const typ, node = "test.restart", "restart-node"
	started := reporting(t, st, rdb, k, conn, typ, node)

	routeTo(t, st, srv.URL(), typ, node, 1)
	ran(t, started, 1, "before the restart")
	srv.Restart(t)
	routeTo(t, st, srv.URL(), typ, node, 2)
	ran(t, started, 2, "after NATS restarted")
}
