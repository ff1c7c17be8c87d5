package executor_test

import (
	"context"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/executor"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestStoppingExecutorHandsBackWhatItsFeedHeld: an executor with one
// worker, busy, is sent ten more tasks on its own subject; its long-lived
// pull delivers them to it (nine held, unacknowledged, in the feed). When it
// stops, those nine are due commands again at once — handed back to
// JetStream and moved, not left to wait out their acknowledgement deadline
// — and its own consumer is gone.
func TestStoppingExecutorHandsBackWhatItsFeedHeld(t *testing.T) {
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
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- e.Run(runCtx) }()
	defer stop()
	select {
	case <-e.Ready():
	case err := <-done:
		t.Fatalf("executor stopped: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("executor not ready")
	}

	now := time.Now().UnixMilli()
	subject := events.ExecSubject(typ, contracts.PriorityNormal, events.NodeToken(node))
	var msgs []bus.Msg
	for id := int64(1); id <= n; id++ {
		_, _, err := st.CreateTask(ctx, store.NewTask{ID: id, Type: typ, Priority: contracts.PriorityNormal,
			Status: contracts.StatusReady, NextRunTimeMs: now, MaxRetries: 3, TimeoutMs: time.Minute.Milliseconds(),
			Reason: "test", Route: events.RouteDispatched})
		require.NoError(t, err)
		data, err := events.Encode(events.TaskDispatched{TaskID: id, Type: typ, NextRunTimeMs: now, Load: true})
		require.NoError(t, err)
		msgs = append(msgs, bus.Msg{Subject: subject, EventType: events.TypeTaskDispatched,
			CorrelationID: strconv.FormatInt(id, 10), Data: data})
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
		return err == nil && info.NumPending == 0 && info.NumAckPending == n-1
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
