package reaper_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/membership"
	"github.com/axsched/ax/services/internal/testenv"
	"github.com/axsched/ax/services/reaper"
)

// TestStrandedWorkMovesToTheDispatcher: task messages on the subjects of a
// node that is gone, or that no longer serves the type, become due commands
// again (each exactly once, on its lane); a live node's queue is left alone.
func TestStrandedWorkMovesToTheDispatcher(t *testing.T) {
	ctx := context.Background()
	st, _ := testenv.Store(t)
	rdb, k := testenv.Redis(t)
	conn := testenv.NATS(t)
	require.NoError(t, bus.EnsureStreams(ctx, conn.JS, bus.StreamOptions{}))
	clk := &manualClock{now: time.Now()}
	require.NoError(t, membership.Beat(ctx, rdb, k.Nodes(), contracts.Node{Name: "live", Types: []string{"ax.noop"}, LastHeartbeat: clk.Now()}))
	require.NoError(t, membership.Beat(ctx, rdb, k.Nodes(), contracts.Node{Name: "dead", Types: []string{"ax.noop"}, LastHeartbeat: clk.Now().Add(-time.Minute)}))

	publish := func(node string, lane contracts.Priority, taskType string, ids ...int64) {
		var msgs []bus.Msg
		for _, id := range ids {
			data, err := json.Marshal(events.TaskDispatched{TaskID: id, Type: taskType, NextRunTimeMs: 42})
			require.NoError(t, err)
			msgs = append(msgs, bus.Msg{Subject: events.ExecSubject(taskType, lane, events.NodeToken(node)), Data: data})
		}
		require.NoError(t, bus.PublishBatch(ctx, conn.JS, msgs))
	}
	publish("dead", contracts.PriorityHigh, "ax.noop", 1, 2, 3)
	publish("never-registered", contracts.PriorityLow, "ax.noop", 4)
	publish("live", contracts.PriorityNormal, "ax.sleep", 5) // live, but does not serve ax.sleep
	publish("live", contracts.PriorityNormal, "ax.noop", 6, 7)

	r := reaper.New(reaper.Config{}, st, rdb, k, clk, testenv.Logger(t)).WithWork(conn.JS)
	moved, err := r.MoveStrandedWork(ctx)
	require.NoError(t, err)
	require.Equal(t, 5, moved)
	again, err := r.MoveStrandedWork(ctx)
	require.NoError(t, err)
	require.Zero(t, again, "nothing is moved twice")

	due, err := conn.JS.CreateOrUpdateConsumer(ctx, events.StreamWork, jetstream.ConsumerConfig{
		Durable: "test", FilterSubject: events.SubjectDue, AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	got := map[int64]contracts.Priority{}
	batch, err := due.Fetch(100, jetstream.FetchMaxWait(500*time.Millisecond))
	require.NoError(t, err)
	for m := range batch.Messages() {
		var d events.TaskDue
		require.NoError(t, events.Decode(m.Data(), &d))
		require.Equal(t, int64(42), d.NextRunTimeMs)
		got[d.TaskID] = d.Priority
		require.NoError(t, m.Ack())
	}
	require.Equal(t, map[int64]contracts.Priority{1: contracts.PriorityHigh, 2: contracts.PriorityHigh, 3: contracts.PriorityHigh,
		4: contracts.PriorityLow, 5: contracts.PriorityNormal}, got)

	stream, err := conn.JS.Stream(ctx, events.StreamWork)
	require.NoError(t, err)
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(events.ExecAll))
	require.NoError(t, err)
	require.Equal(t, map[string]uint64{events.ExecSubject("ax.noop", contracts.PriorityNormal, events.NodeToken("live")): 2},
		info.State.Subjects, "only the live node's own queue is left")
}
