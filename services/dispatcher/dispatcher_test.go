package dispatcher_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/dispatcher"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// startDispatcher runs a dispatcher until the test ends and returns the
// store and connection it works on.
func startDispatcher(t *testing.T) (*store.Store, *bus.Conn) {
	t.Helper()
	st, _ := testenv.Store(t)
	rdb, k := testenv.Redis(t)
	conn := testenv.NATS(t)
	logger := testenv.Logger(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	d := dispatcher.New(dispatcher.Config{Heartbeat: time.Second}, st, rdb, k, conn, clock.System{}, logger)
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	select {
	case <-d.Ready():
	case err := <-done:
		t.Fatalf("stopped before ready: %v", err)
	}
	return st, conn
}

// dispatchedMsgs collects what reaches the executors' subjects for long
// enough for anything the dispatcher would send.
func dispatchedMsgs(t *testing.T, conn *bus.Conn) []jetstream.Msg {
	t.Helper()
	ctx := context.Background()
	c, err := conn.JS.CreateOrUpdateConsumer(ctx, events.StreamWork, jetstream.ConsumerConfig{
		Durable: "test", FilterSubject: "ax.work.exec.>", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	var got []jetstream.Msg
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		batch, err := c.Fetch(10, jetstream.FetchMaxWait(200*time.Millisecond))
		require.NoError(t, err)
		for m := range batch.Messages() {
			got = append(got, m)
			require.NoError(t, m.Ack())
		}
	}
	return got
}

// TestDueCommandsDispatchWhereNotWhat: a due command for a READY task goes
// to its executors' subject with the attempt and timeout, and without the
// payload, which the executor's claim reads from the row (so a payload is
// stored in JetStream in no command). A task not due yet is held back.
func TestDueCommandsDispatchWhereNotWhat(t *testing.T) {
	st, conn := startDispatcher(t)
	ctx := context.Background()

	now := time.Now().UnixMilli()
	const due, later int64 = 11, 12
	for id, at := range map[int64]int64{due: now - 10, later: now + 60_000} {
		_, _, err := st.CreateTask(ctx, store.NewTask{ID: id, Type: "ax.noop", Priority: contracts.PriorityLow,
			Payload: []byte(`{"marker":"PAYLOAD-MARKER"}`), Status: contracts.StatusReady, NextRunTimeMs: at,
			MaxRetries: 3, TimeoutMs: 5000, Reason: "test"})
		require.NoError(t, err)
	}
	var cmds []bus.Msg
	for _, id := range []int64{due, later} {
		data, err := json.Marshal(events.TaskDue{TaskID: id, Priority: contracts.PriorityLow, NextRunTimeMs: now})
		require.NoError(t, err)
		cmds = append(cmds, bus.Msg{Subject: events.SubjectDue, Data: data})
	}
	require.NoError(t, bus.PublishBatch(ctx, conn.JS, cmds))

	msgs := dispatchedMsgs(t, conn)
	require.Len(t, msgs, 1, "only the task that is due")
	require.NotContains(t, string(msgs[0].Data()), "PAYLOAD-MARKER")
	var td events.TaskDispatched
	require.NoError(t, events.Decode(msgs[0].Data(), &td))
	require.Equal(t, events.TaskDispatched{TaskID: due, Type: "ax.noop", Attempt: 0, TimeoutMs: 5000, NextRunTimeMs: now - 10}, td,
		"not lean: the lease is sized by the timeout from the start")
}

// TestLeanDueCommandsAreFencedNotRead: a due command that says the task's
// type, attempt and state (what the timer indexes) is handed on as a lean
// dispatch; a RETRYING task becomes READY first, and one whose due time
// moved later since it was indexed stays where it is and is not dispatched.
func TestLeanDueCommandsAreFencedNotRead(t *testing.T) {
	st, conn := startDispatcher(t)
	ctx := context.Background()

	now := time.Now().UnixMilli()
	const ready, retrying, moved int64 = 21, 22, 23
	for _, id := range []int64{ready, retrying, moved} {
		_, _, err := st.CreateTask(ctx, store.NewTask{ID: id, Type: "ax.noop", Priority: contracts.PriorityLow,
			Status: contracts.StatusReady, NextRunTimeMs: now - 10, MaxRetries: 3, TimeoutMs: 5000, Reason: "test"})
		require.NoError(t, err)
	}
	backoff := func(id, until int64) {
		attempt := 0
		_, err := st.Transfer(ctx, store.TransferParams{TaskID: id, From: contracts.StatusReady, To: contracts.StatusRetrying,
			Attempt: &attempt, NextRunTimeMs: &until, Reason: "test backoff"})
		require.NoError(t, err)
	}
	backoff(retrying, now-10)
	backoff(moved, now-5) // re-scheduled after the command below was popped

	var cmds []bus.Msg
	for id, status := range map[int64]contracts.Status{ready: contracts.StatusReady,
		retrying: contracts.StatusRetrying, moved: contracts.StatusRetrying} {
		data, err := json.Marshal(events.TaskDue{TaskID: id, Priority: contracts.PriorityLow, NextRunTimeMs: now - 10,
			Type: "ax.noop", Attempt: 0, Status: status})
		require.NoError(t, err)
		cmds = append(cmds, bus.Msg{Subject: events.SubjectDue, Data: data})
	}
	require.NoError(t, bus.PublishBatch(ctx, conn.JS, cmds))

	got := map[int64]events.TaskDispatched{}
	for _, m := range dispatchedMsgs(t, conn) {
		var td events.TaskDispatched
		require.NoError(t, events.Decode(m.Data(), &td))
		got[td.TaskID] = td
	}
	lean := func(id int64) events.TaskDispatched {
		return events.TaskDispatched{TaskID: id, Type: "ax.noop", NextRunTimeMs: now - 10, Load: true}
	}
	require.Equal(t, map[int64]events.TaskDispatched{ready: lean(ready), retrying: lean(retrying)}, got)

	for id, want := range map[int64]contracts.Status{ready: contracts.StatusReady,
		retrying: contracts.StatusReady, moved: contracts.StatusRetrying} {
		task, err := st.GetTask(ctx, id)
		require.NoError(t, err)
		require.Equal(t, want, task.Status, "task %d", id)
	}
	hist, err := st.History(ctx, retrying)
	require.NoError(t, err)
	require.Equal(t, "backoff elapsed", hist[len(hist)-1].Reason)
}
