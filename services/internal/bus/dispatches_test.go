package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/testenv"
)

// dispatchLane publishes msgs on an executor subject of its own and
// returns a consumer of it whose unacknowledged messages come back after
// ackWait.
func dispatchLane(t *testing.T, conn *bus.Conn, name string, ackWait time.Duration, msgs ...bus.Msg) jetstream.Consumer {
	t.Helper()
	ctx := context.Background()
	subject := events.ExecSubject("test.parts."+name, contracts.PriorityNormal, events.SharedToken)
	for i := range msgs {
		msgs[i].Subject = subject
	}
	require.NoError(t, conn.Publish(ctx, msgs))
	c, err := conn.JS.CreateOrUpdateConsumer(ctx, events.StreamWork, jetstream.ConsumerConfig{
		Durable: "test_parts_" + name, FilterSubject: subject, AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait})
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = conn.JS.DeleteConsumer(context.Background(), events.StreamWork, "test_parts_"+name)
	})
	return c
}

// fetchOne fetches the next message of c within wait, or nil.
func fetchOne(t *testing.T, c jetstream.Consumer, wait time.Duration) jetstream.Msg {
	t.Helper()
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(wait))
	require.NoError(t, err)
	for m := range batch.Messages() {
		return m
	}
	return nil
}

func batchOf(t *testing.T, ids ...int64) bus.Msg {
	t.Helper()
	var b events.TaskDispatches
	for _, id := range ids {
		b.Tasks = append(b.Tasks, events.TaskDispatched{TaskID: id, Type: "test.parts", Attempt: int(id), Load: true})
	}
	data, err := events.Encode(b)
	require.NoError(t, err)
	return bus.Msg{EventType: events.TypeTaskDispatches, Data: data}
}

// TestDispatchesOfOneMessageOrABatch: a single dispatch is its own
// message; a batch is read into one dispatch per task, in order, each with
// a handle of its own.
func TestDispatchesOfOneMessageOrABatch(t *testing.T) {
	conn := testenv.NATS(t)
	one, err := events.Encode(events.TaskDispatched{TaskID: 7, Type: "test.parts", Attempt: 2})
	require.NoError(t, err)
	c := dispatchLane(t, conn, "read", time.Minute,
		bus.Msg{EventType: events.TypeTaskDispatched, Data: one}, batchOf(t, 1, 2, 3),
		bus.Msg{EventType: events.TypeTaskDispatches, Data: []byte(`{"tasks":[]}`)})

	m := fetchOne(t, c, time.Second)
	ds, err := bus.Dispatches(m, nil)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	require.Equal(t, events.TaskDispatched{TaskID: 7, Type: "test.parts", Attempt: 2}, ds[0].Task)
	require.Same(t, m, ds[0].Msg, "a single dispatch answers with its message")
	require.NoError(t, ds[0].Msg.Ack())

	ds, err = bus.Dispatches(fetchOne(t, c, time.Second), nil)
	require.NoError(t, err)
	var ids []int64
	for _, d := range ds {
		ids = append(ids, d.Task.TaskID)
		require.Equal(t, int(d.Task.TaskID), d.Task.Attempt)
		require.NoError(t, d.Msg.Ack())
	}
	require.Equal(t, []int64{1, 2, 3}, ids)

	_, err = bus.Dispatches(fetchOne(t, c, time.Second), nil)
	require.ErrorContains(t, err, "no tasks", "an empty batch is refused")
}

// TestABatchIsAnsweredOnceEveryPartHasItsVerdict drives the parts of real
// JetStream messages and watches what the server does with them.
func TestABatchIsAnsweredOnceEveryPartHasItsVerdict(t *testing.T) {
	const ackWait = 2 * time.Second
	cases := []struct {
		name string
		// verdicts, one per part, in the order given
		verdicts []string
		// again: the message comes back (no later than within after)
		again bool
		after time.Duration
	}{
		{name: "acked", verdicts: []string{"ack", "ack", "ack"}},
		{name: "terminated_and_acked", verdicts: []string{"ack", "term", "ack"}},
		// Never answered: it comes back after its ack wait, as a lost
		// message does.
		{name: "acked_twice_is_one_verdict", verdicts: []string{"ack", "ack", "ack", "ack"}, again: true},
		{name: "one_handed_back", verdicts: []string{"ack", "nak", "ack"}, again: true},
		{name: "handed_back_after_the_longest_delay", verdicts: []string{"nak300", "ack", "nak900"}, again: true, after: 900 * time.Millisecond},
	}
	conn := testenv.NATS(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := dispatchLane(t, conn, tc.name, ackWait, batchOf(t, 1, 2, 3))
			m := fetchOne(t, c, time.Second)
			ds, err := bus.Dispatches(m, nil)
			require.NoError(t, err)
			parts := len(ds)
			if tc.name == "acked_twice_is_one_verdict" {
				// The first part's verdict given again stands in for the
				// third's: the message must stay unanswered.
				ds = []bus.Dispatch{ds[0], ds[0], ds[1], ds[1]}
			}
			var last time.Time
			for i, v := range tc.verdicts {
				if i == len(tc.verdicts)-1 {
					// Before the last verdict nothing has reached the
					// server: the message is neither back nor gone.
					require.Nil(t, fetchOne(t, c, 300*time.Millisecond), "answered before its last part")
					info, err := c.Info(context.Background())
					require.NoError(t, err)
					require.Equal(t, 1, info.NumAckPending)
				}
				d := ds[i]
				switch v {
				case "ack":
					require.NoError(t, d.Msg.Ack())
				case "term":
					require.NoError(t, d.Msg.Term())
				case "nak":
					require.NoError(t, d.Msg.Nak())
				case "nak300":
					require.NoError(t, d.Msg.NakWithDelay(300*time.Millisecond))
				case "nak900":
					require.NoError(t, d.Msg.NakWithDelay(900*time.Millisecond))
				}
				last = time.Now()
			}
			require.Equal(t, 3, parts)
			if !tc.again {
				require.Nil(t, fetchOne(t, c, ackWait+time.Second), "acknowledged: never delivered again")
				info, err := c.Info(context.Background())
				require.NoError(t, err)
				require.Zero(t, info.NumAckPending)
				return
			}
			back := fetchOne(t, c, ackWait+2*time.Second)
			require.NotNil(t, back, "the whole message comes back")
			require.GreaterOrEqual(t, time.Since(last), tc.after-50*time.Millisecond, "not before the delay asked for")
			md, err := back.Metadata()
			require.NoError(t, err)
			require.EqualValues(t, 2, md.NumDelivered)
			again, err := bus.Dispatches(back, nil)
			require.NoError(t, err)
			require.Len(t, again, 3, "with every task it carried")
			for _, d := range again {
				require.NoError(t, d.Msg.Ack())
			}
		})
	}
}

// TestAPartKeepsItsBatchAlive: while any part waits for its verdict and
// reports progress, the message is not delivered again past its ack wait.
func TestAPartKeepsItsBatchAlive(t *testing.T) {
	const ackWait = 2 * time.Second
	conn := testenv.NATS(t)
	c := dispatchLane(t, conn, "alive", ackWait, batchOf(t, 1, 2))
	ds, err := bus.Dispatches(fetchOne(t, c, time.Second), nil)
	require.NoError(t, err)
	require.NoError(t, ds[0].Msg.Ack())
	deadline := time.Now().Add(3 * ackWait)
	for time.Now().Before(deadline) {
		require.NoError(t, ds[1].Msg.InProgress())
		require.Nil(t, fetchOne(t, c, 250*time.Millisecond), "redelivered while a part was in progress")
	}
	require.NoError(t, ds[1].Msg.Ack())
	require.Nil(t, fetchOne(t, c, ackWait+500*time.Millisecond))
	info, err := c.Info(context.Background())
	require.NoError(t, err)
	require.Zero(t, info.NumAckPending)
}

// TestAPartHandedBackAtOnceGoesAlone: with a publisher, a part handed back
// at once (Nak) is sent again alone on the message's subject and counts as
// done, so the batch is acknowledged with its other parts and none of them
// comes back; the task handed back is delivered again on its own.
func TestAPartHandedBackAtOnceGoesAlone(t *testing.T) {
	const ackWait = 2 * time.Second
	conn := testenv.NATS(t)
	c := dispatchLane(t, conn, "alone", ackWait, batchOf(t, 1, 2, 3))
	m := fetchOne(t, c, time.Second)
	ds, err := bus.Dispatches(m, conn.JS)
	require.NoError(t, err)
	require.NoError(t, ds[1].Msg.Nak())
	require.NoError(t, ds[0].Msg.Ack())
	require.NoError(t, ds[2].Msg.Ack())

	back := fetchOne(t, c, time.Second)
	require.NotNil(t, back, "the task handed back is delivered again")
	require.Equal(t, m.Subject(), back.Subject())
	require.Equal(t, events.TypeTaskDispatched, back.Headers().Get(events.HeaderEventType), "alone")
	again, err := bus.Dispatches(back, conn.JS)
	require.NoError(t, err)
	require.Len(t, again, 1)
	require.Equal(t, events.TaskDispatched{TaskID: 2, Type: "test.parts", Attempt: 2, Load: true}, again[0].Task)
	require.NoError(t, again[0].Msg.Ack())

	require.Nil(t, fetchOne(t, c, ackWait+time.Second), "the batch was acknowledged: its other tasks do not come back")
	info, err := c.Info(context.Background())
	require.NoError(t, err)
	require.Zero(t, info.NumAckPending)
}
