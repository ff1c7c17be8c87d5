package timer

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/dispatch"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

func newTimer(t testing.TB) (*Timer, *store.Store) {
	st, _ := testenv.Store(t)
	rdb, k := testenv.Redis(t)
	conn := testenv.NATS(t)
	tm := New(Config{}, st, rdb, k, conn, testenv.Logger(t))
	_, err := tm.ensureIndex(context.Background())
	require.NoError(t, err)
	return tm, st
}

func dueCommands(t *testing.T, tm *Timer) []events.TaskDue {
	t.Helper()
	var out []events.TaskDue
	for _, m := range testenv.DrainWork(t, tm.conn, events.SubjectDue) {
		var d events.TaskDue
		require.NoError(t, events.Decode(m.Data(), &d))
		out = append(out, d)
	}
	return out
}

func TestPopTakesDueTasksInLaneOrderAndNothingEarly(t *testing.T) {
	tm, _ := newTimer(t)
	ctx := context.Background()
	now, err := tm.rdb.Time(ctx).Result()
	require.NoError(t, err)
	past, future := now.Add(-10*time.Millisecond).UnixMilli(), now.Add(400*time.Millisecond).UnixMilli()
	var refs []store.DueRef
	id := int64(0)
	for _, p := range []contracts.Priority{contracts.PriorityLow, contracts.PriorityNormal, contracts.PriorityHigh} {
		for range 3 {
			id++
			refs = append(refs, store.DueRef{ID: id, Priority: p, NextRunTimeMs: past})
			id++
			refs = append(refs, store.DueRef{ID: id, Priority: p, NextRunTimeMs: future})
		}
	}
	require.NoError(t, tm.Index(ctx, refs))

	sleep, err := tm.RunOnce(ctx)
	require.NoError(t, err)
	require.Greater(t, sleep, time.Duration(0))
	require.LessOrEqual(t, sleep, 400*time.Millisecond+tm.cfg.Coalesce,
		"the loop wakes for the earliest future task (plus the coalescing window), not a full tick later")
	got := dueCommands(t, tm)
	require.Len(t, got, 9, "exactly the due tasks")
	for i, d := range got {
		require.Equal(t, past, d.NextRunTimeMs)
		require.Equal(t, contracts.Priorities[i/3], d.Priority, "command %d out of lane order", i)
	}

	time.Sleep(sleep)
	for {
		n, err := tm.rdb.Time(ctx).Result()
		require.NoError(t, err)
		if n.UnixMilli() >= future {
			break
		}
		time.Sleep(time.Millisecond)
	}
	_, err = tm.RunOnce(ctx)
	require.NoError(t, err)
	require.Len(t, dueCommands(t, tm), 9, "the rest, once due by the Redis clock")
}

func TestLostIndexIsRebuiltFromMySQL(t *testing.T) {
	tm, st := newTimer(t)
	ctx := context.Background()
	for i := range 5 {
		_, _, err := st.CreateTask(ctx, store.NewTask{ID: int64(100 + i), Type: "ax.noop", Priority: contracts.PriorityLow,
			Status: contracts.StatusReady, NextRunTimeMs: time.Now().Add(time.Hour).UnixMilli(), MaxRetries: 3, TimeoutMs: 1000, Reason: "t"})
		require.NoError(t, err)
	}
	require.NoError(t, tm.rdb.Del(ctx, tm.keys.Generation(), tm.keys.Lane(contracts.PriorityLow)).Err())
	_, err := tm.RunOnce(ctx)
	require.NoError(t, err)
	members, err := tm.rdb.ZRange(ctx, tm.keys.Lane(contracts.PriorityLow), 0, -1).Result()
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"100:0:ready:ax.noop", "101:0:ready:ax.noop", "102:0:ready:ax.noop",
		"103:0:ready:ax.noop", "104:0:ready:ax.noop"}, members, "rebuilt lean: with type, attempt and state")
	require.EqualValues(t, 1, tm.rdb.Exists(ctx, tm.keys.Generation()).Val())
}

// BenchmarkPop measures the Lua pop of 1,000 due IDs across three lanes
// (index, then one pop call), the timer's hot path.
func BenchmarkPop(b *testing.B) {
	tm, _ := newTimer(b)
	ctx := context.Background()
	refs := make([]store.DueRef, 1000)
	keys := append([]string{tm.keys.Generation()}, tm.keys.Lanes()...)
	b.ReportAllocs()
	for i := range b.N {
		for j := range refs {
			refs[j] = store.DueRef{ID: int64(i*1000 + j), Priority: contracts.Priorities[j%3], NextRunTimeMs: 1}
		}
		require.NoError(b, tm.Index(ctx, refs))
		res, err := popScript.Run(ctx, tm.rdb, keys, 1000).Slice()
		require.NoError(b, err)
		require.Len(b, res, 2+3*1000, strconv.Itoa(i))
	}
	b.ReportMetric(float64(b.N*1000)/b.Elapsed().Seconds(), "ids/s")
}

// TestReadyEventsAreIndexedByRoute feeds real READY and RETRYING events,
// all on the timer's subjects as a relay of an older version published
// them, through the timer's handler, each alone and the READY ones
// travelling together (events.TaskTransfers): only those routed to the
// timer (and every RETRYING one) reach the lanes.
func TestReadyEventsAreIndexedByRoute(t *testing.T) {
	for _, together := range []bool{false, true} {
		t.Run(fmt.Sprintf("together=%v", together), func(t *testing.T) {
			tm, _ := newTimer(t)
			ctx := context.Background()
			due := time.Now().Add(time.Hour).UnixMilli()
			evs := []events.TaskTransferred{
				{TaskID: 1, To: contracts.StatusReady, Route: events.RouteTimer},
				{TaskID: 2, To: contracts.StatusReady, Route: events.RouteDispatch},
				{TaskID: 3, To: contracts.StatusReady, Route: events.RouteDispatched},
				{TaskID: 4, To: contracts.StatusRetrying},
			}
			for i := range evs {
				ev := &evs[i]
				ev.EventID, ev.Type, ev.Priority, ev.NextRunTimeMs = "e"+strconv.FormatInt(ev.TaskID, 10), "ax.noop", contracts.PriorityNormal, due
			}
			var sent [][]events.TaskTransferred
			if together {
				sent = [][]events.TaskTransferred{evs[:3], evs[3:]}
			} else {
				for _, ev := range evs {
					sent = append(sent, []events.TaskTransferred{ev})
				}
			}
			for _, group := range sent {
				m := &nats.Msg{Subject: events.TaskEventSubject(group[0].To), Header: nats.Header{}}
				var err error
				if len(group) == 1 {
					m.Data, err = json.Marshal(group[0])
				} else {
					m.Data, err = json.Marshal(events.TaskTransfers{Transfers: group})
					m.Header.Set(events.HeaderEventType, events.TypeTaskTransfers)
				}
				require.NoError(t, err)
				_, err = tm.conn.JS.PublishMsg(ctx, m)
				require.NoError(t, err)
			}
			c, err := tm.conn.JS.OrderedConsumer(ctx, events.StreamEvents, jetstream.OrderedConsumerConfig{})
			require.NoError(t, err)
			batch, err := c.Fetch(len(sent), jetstream.FetchMaxWait(2*time.Second))
			require.NoError(t, err)
			var msgs []jetstream.Msg
			for m := range batch.Messages() {
				msgs = append(msgs, m)
			}
			require.Len(t, msgs, len(sent))
			require.NoError(t, tm.handleReady(ctx, msgs))
			members, err := tm.rdb.ZRange(ctx, tm.keys.Lane(contracts.PriorityNormal), 0, -1).Result()
			require.NoError(t, err)
			require.ElementsMatch(t, []string{"1:0:ready:ax.noop", "4:0:retrying:ax.noop"}, members)
		})
	}
}

// TestDueCommandsSayWhatTheIndexKnows: a task indexed with its type,
// attempt and state becomes a lean due command; a bare ID (an entry from a
// timer that predates lean entries) still becomes a plain one, which the
// dispatcher reads back; a malformed member is dropped, not passed on.
func TestDueCommandsSayWhatTheIndexKnows(t *testing.T) {
	tm, _ := newTimer(t)
	ctx := context.Background()
	past := time.Now().Add(-time.Second).UnixMilli()
	require.NoError(t, tm.Index(ctx, []store.DueRef{{ID: 31, Priority: contracts.PriorityHigh, NextRunTimeMs: past,
		Type: "ax.noop", Attempt: 2, Status: contracts.StatusRetrying}}))
	lane := tm.keys.Lane(contracts.PriorityNormal)
	require.NoError(t, tm.rdb.ZAdd(ctx, lane, redis.Z{Score: float64(past), Member: "32"},
		redis.Z{Score: float64(past), Member: "33:x:ready:ax.noop"}).Err())
	_, err := tm.RunOnce(ctx)
	require.NoError(t, err)

	got := dueCommands(t, tm)
	require.ElementsMatch(t, []events.TaskDue{
		{TaskID: 31, Priority: contracts.PriorityHigh, NextRunTimeMs: past, Type: "ax.noop", Attempt: 2, Status: contracts.StatusRetrying},
		{TaskID: 32, Priority: contracts.PriorityNormal, NextRunTimeMs: past},
	}, got)
	require.True(t, got[0].Lean() != got[1].Lean(), "one lean, one to read back")
	require.Zero(t, tm.rdb.ZCard(ctx, lane).Val(), "the malformed member left the lane too")
}

// TestDueReadyTasksGoStraightToTheirExecutors: with a dispatch.Sender, a
// due READY task indexed with its type and attempt is dispatched by the
// timer itself (lean, on its lane, carrying the popped score the claim is
// fenced on) and marked; a due RETRYING task becomes READY first (fenced on
// its indexed attempt: one whose row moved on stays as it is and goes
// nowhere); an entry of an older timer (a bare ID) goes to the dispatcher
// as a due command; a READY task of a paused type goes nowhere; a task not
// due yet stays indexed.
func TestDueReadyTasksGoStraightToTheirExecutors(t *testing.T) {
	st, _ := testenv.Store(t)
	rdb, k := testenv.Redis(t)
	conn := testenv.NATS(t)
	logger := testenv.Logger(t)
	ctx := context.Background()
	send := dispatch.New(dispatch.Config{Heartbeat: time.Second}, st, rdb, k, clock.System{}, logger)
	tm := New(Config{Dispatch: send}, st, rdb, k, conn, logger)
	_, err := tm.ensureIndex(ctx)
	require.NoError(t, err)

	const pausedType = "test.paused"
	for _, name := range []string{"ax.noop", pausedType} {
		require.NoError(t, st.RegisterType(ctx, store.TaskType{Name: name, TimeoutMs: 1000, MaxRetries: 3}))
	}
	_, err = st.UpdateType(ctx, pausedType, "test", func(tt *store.TaskType) error { tt.Paused = true; return nil })
	require.NoError(t, err)

	now, err := rdb.Time(ctx).Result()
	require.NoError(t, err)
	past, future := now.Add(-10*time.Millisecond).UnixMilli(), now.Add(time.Hour).UnixMilli()
	// Tasks 2 and 6 wait out a backoff after their first attempt; task 6's
	// row has moved on to its second attempt since it was indexed.
	for id, attempt := range map[int64]int{2: 1, 6: 2} {
		_, _, err := st.CreateTask(ctx, store.NewTask{ID: id, Type: "ax.noop", Priority: contracts.PriorityNormal,
			Status: contracts.StatusReady, NextRunTimeMs: past, MaxRetries: 3, TimeoutMs: 1000, Reason: "test"})
		require.NoError(t, err)
		_, err = st.DB().ExecContext(ctx, `UPDATE tasks SET status = 'RETRYING', attempt = ?, next_run_time = ? WHERE id = ?`,
			attempt, past, id)
		require.NoError(t, err)
	}
	require.NoError(t, tm.Index(ctx, []store.DueRef{
		{ID: 1, Priority: contracts.PriorityHigh, NextRunTimeMs: past, Type: "ax.noop", Attempt: 2, Status: contracts.StatusReady},
		{ID: 2, Priority: contracts.PriorityNormal, NextRunTimeMs: past, Type: "ax.noop", Attempt: 1, Status: contracts.StatusRetrying},
		{ID: 3, Priority: contracts.PriorityLow, NextRunTimeMs: past},
		{ID: 4, Priority: contracts.PriorityHigh, NextRunTimeMs: past, Type: pausedType, Status: contracts.StatusReady},
		{ID: 5, Priority: contracts.PriorityHigh, NextRunTimeMs: future, Type: "ax.noop", Status: contracts.StatusReady},
		{ID: 6, Priority: contracts.PriorityNormal, NextRunTimeMs: past, Type: "ax.noop", Attempt: 1, Status: contracts.StatusRetrying},
	}))
	_, err = tm.RunOnce(ctx)
	require.NoError(t, err)

	work := testenv.DrainWork(t, conn, "ax.work.exec.>")
	require.Len(t, work, 2, "the due READY task and the RETRYING task whose backoff ended, of a running type")
	got := map[int64]events.TaskDispatched{}
	subjects := map[int64]string{}
	for _, w := range work {
		var td events.TaskDispatched
		require.NoError(t, events.Decode(w.Data(), &td))
		got[td.TaskID], subjects[td.TaskID] = td, w.Subject()
	}
	require.Equal(t, events.TaskDispatched{TaskID: 1, Type: "ax.noop", Attempt: 2, NextRunTimeMs: past, Load: true}, got[1])
	require.Equal(t, events.ExecSubject("ax.noop", contracts.PriorityHigh, events.SharedToken), subjects[1])
	require.Equal(t, events.TaskDispatched{TaskID: 2, Type: "ax.noop", Attempt: 1, NextRunTimeMs: past, Load: true}, got[2])
	require.Equal(t, events.ExecSubject("ax.noop", contracts.PriorityNormal, events.SharedToken), subjects[2])

	retried, err := st.GetTask(ctx, 2)
	require.NoError(t, err)
	require.Equal(t, contracts.StatusReady, retried.Status, "its backoff ended in MySQL before it was dispatched")
	require.Equal(t, 1, retried.Attempt, "the claim moves the attempt on, not the end of a backoff")
	var route int
	require.NoError(t, st.DB().QueryRowContext(ctx, `SELECT route FROM task_history
		WHERE task_id = 2 AND from_status = 'RETRYING' AND to_status = 'READY'`).Scan(&route))
	require.Equal(t, 2, route, "its READY event says it was dispatched already (events.RouteDispatched)")
	moved, err := st.GetTask(ctx, 6)
	require.NoError(t, err)
	require.Equal(t, contracts.StatusRetrying, moved.Status, "a task that moved on since it was indexed loses the fenced transfer")
	require.Equal(t, 2, moved.Attempt)

	var dues []int64
	for _, d := range dueCommands(t, tm) {
		dues = append(dues, d.TaskID)
	}
	require.Equal(t, []int64{3}, dues, "only the bare entry goes to the dispatcher")

	marked := func(id int64) bool {
		_, err := rdb.ZScore(ctx, k.Dispatched(), strconv.FormatInt(id, 10)).Result()
		return err == nil
	}
	require.True(t, marked(1), "marked dispatched")
	require.False(t, marked(4), "the paused task is not")
	left, err := rdb.ZRange(ctx, k.Lane(contracts.PriorityHigh), 0, -1).Result()
	require.NoError(t, err)
	require.Equal(t, []string{"5:0:ready:ax.noop"}, left, "the task not due yet stays indexed")
}
