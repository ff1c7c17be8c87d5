package outbox_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/dispatch"
	"github.com/axsched/ax/services/internal/outbox"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// dispatchingRelay is a relay that dispatches tasks due at once, and the
// Redis key where it marks them.
func dispatchingRelay(t *testing.T, st *store.Store, conn *bus.Conn) (*outbox.Relay, func(id int64) bool) {
	t.Helper()
	rdb, k := testenv.Redis(t)
	logger := testenv.Logger(t)
	send := dispatch.New(dispatch.Config{Heartbeat: time.Second}, st, rdb, k, clock.System{}, logger)
	marked := func(id int64) bool {
		_, err := rdb.ZScore(context.Background(), k.Dispatched(), strconv.FormatInt(id, 10)).Result()
		return err == nil
	}
	return outbox.New(outbox.Config{Dispatch: send}, st, conn, logger), marked
}

// TestRelayDispatchesTasksDueAtOnceWithTheirEvents: with no dispatcher and
// no timer running, a pass of the relay publishes every READY event and
// dispatches, lean, exactly the task that was due when it became READY
// (events.RouteDispatch) and whose type is not paused; the task left to the
// timer, the one its writer dispatched already and the paused one are not
// dispatched. The dispatched task is marked for the reconciler.
func TestRelayDispatchesTasksDueAtOnceWithTheirEvents(t *testing.T) {
	st, _ := testenv.Store(t)
	conn := testenv.NATS(t)
	ctx := context.Background()
	relay, marked := dispatchingRelay(t, st, conn)

	const pausedType = "test.paused"
	for _, name := range []string{"ax.noop", pausedType} {
		require.NoError(t, st.RegisterType(ctx, store.TaskType{Name: name, TimeoutMs: 1000, MaxRetries: 3}))
	}
	_, err := st.UpdateType(ctx, pausedType, "test", func(tt *store.TaskType) error { tt.Paused = true; return nil })
	require.NoError(t, err)

	now := time.Now().UnixMilli()
	tasks := []struct {
		id    int64
		typ   string
		route events.Route
	}{
		{1, "ax.noop", events.RouteDispatch},
		{2, "ax.noop", events.RouteTimer},
		{3, "ax.noop", events.RouteDispatched},
		{4, pausedType, events.RouteDispatch},
	}
	for _, tk := range tasks {
		_, _, err := st.CreateTask(ctx, store.NewTask{ID: tk.id, Type: tk.typ, Priority: contracts.PriorityHigh,
			Status: contracts.StatusReady, NextRunTimeMs: now, MaxRetries: 3, TimeoutMs: 1000, Reason: "test", Route: tk.route})
		require.NoError(t, err)
	}

	n, err := relay.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, len(tasks), n, "every READY event is published")
	require.Len(t, streamEventIDs(t, conn.JS), len(tasks)+1, "and the pause of the type")
	// Only the task left to the timer is on the subject the timer consumes.
	require.Equal(t, map[string]uint64{"ax.events.task.ready": 1, "ax.events.task.ready.now": 3},
		streamSubjects(t, conn, "ax.events.task."))

	msgs := testenv.DrainWork(t, conn, "ax.work.exec.>")
	require.Len(t, msgs, 1, "only the task due at once of a running type")
	var td events.TaskDispatched
	require.NoError(t, events.Decode(msgs[0].Data(), &td))
	// It says when its row was written and when the relay read it, for
	// ax_task_hop_seconds.
	require.Positive(t, td.CommittedNs, "the row's time")
	require.Positive(t, td.SentNs, "the relay's read")
	td.CommittedNs, td.SentNs = 0, 0
	require.Equal(t, events.TaskDispatched{TaskID: 1, Type: "ax.noop", Attempt: 0, NextRunTimeMs: now, Load: true}, td,
		"a lean dispatch: the executor's claim reads the row")
	require.Equal(t, events.ExecSubject("ax.noop", contracts.PriorityHigh, events.SharedToken), msgs[0].Subject(),
		"its lane, on the shared subject while no executor serves the type")
	require.True(t, marked(1), "marked dispatched")
	require.False(t, marked(4), "the paused task is not marked")

	task, err := st.GetTask(ctx, 4)
	require.NoError(t, err)
	require.Equal(t, contracts.StatusReady, task.Status, "the paused task waits READY")
}

// streamSubjects counts the messages on AX_EVENTS by subject.
// streamSubjects counts the events on AX_EVENTS under prefix, by subject.
func streamSubjects(t *testing.T, conn *bus.Conn, prefix string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	for _, e := range testenv.StreamEvents(t, conn.JS) {
		if strings.HasPrefix(e.Subject, prefix) {
			out[e.Subject]++
		}
	}
	return out
}

// TestRelayHoldsItsCursorUntilTheDispatchIsStored: while the dispatch of a
// task due at once cannot be stored (AX_WORK is gone), the pass fails and
// the cursor stays before the task's row, although its event was stored;
// once the stream is back the next pass dispatches the task, and its event
// is still stored once.
func TestRelayHoldsItsCursorUntilTheDispatchIsStored(t *testing.T) {
	st, _ := testenv.Store(t)
	conn := testenv.NATS(t)
	ctx := context.Background()
	relay, marked := dispatchingRelay(t, st, conn)

	_, _, err := st.CreateTask(ctx, store.NewTask{ID: 7, Type: "ax.noop", Priority: contracts.PriorityNormal,
		Status: contracts.StatusReady, NextRunTimeMs: time.Now().UnixMilli(), MaxRetries: 3, TimeoutMs: 1000,
		Reason: "test", Route: events.RouteDispatch})
	require.NoError(t, err)
	require.NoError(t, conn.JS.DeleteStream(ctx, events.StreamWork))

	_, err = relay.RunOnce(ctx)
	require.Error(t, err, "the dispatch cannot be stored")
	require.EqualValues(t, 1, backlog(t, st), "the cursor did not move past the task")
	require.Len(t, streamEventIDs(t, conn.JS), 1, "its event went out")
	require.False(t, marked(7))

	require.NoError(t, bus.EnsureStreams(ctx, conn.JS, bus.StreamOptions{}))
	n, err := relay.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Zero(t, backlog(t, st))
	msgs := testenv.DrainWork(t, conn, "ax.work.exec.>")
	require.Len(t, msgs, 1)
	require.Equal(t, "7", msgs[0].Headers().Get(events.HeaderCorrelationID))
	require.True(t, marked(7))
	for id, c := range streamEventIDs(t, conn.JS) {
		require.Equal(t, 1, c, "event %s stored %d times", id, c)
	}
}
