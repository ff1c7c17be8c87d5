package bus_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/testenv"
)

// replySpy counts the acknowledgements the server sends to inboxes, seen
// from a connection of its own.
func replySpy(t *testing.T, conn *bus.Conn) *atomic.Int64 {
	t.Helper()
	spy, err := nats.Connect(conn.URL)
	require.NoError(t, err)
	t.Cleanup(spy.Close)
	var n atomic.Int64
	_, err = spy.Subscribe("_INBOX.>", func(m *nats.Msg) {
		if strings.HasPrefix(string(m.Data), `{"stream"`) {
			n.Add(1)
		}
	})
	require.NoError(t, err)
	require.NoError(t, spy.Flush())
	return &n
}

func eventMsgs(from, to int) []bus.Msg {
	var msgs []bus.Msg
	for i := from; i < to; i++ {
		msgs = append(msgs, bus.Msg{Subject: events.TaskEventSubject(contracts.StatusSuccess),
			ID: fmt.Sprintf("ev-%d", i), EventType: events.TypeTaskTransferred, Data: []byte(fmt.Sprintf(`{"n":%d}`, i))})
	}
	return msgs
}

// storedEvents reads AX_EVENTS from the start: each message's ID, in order.
func storedEvents(t *testing.T, conn *bus.Conn) []string {
	t.Helper()
	ctx := context.Background()
	s, err := conn.JS.Stream(ctx, events.StreamEvents)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	var ids []string
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.GetMsg(ctx, seq)
		require.NoError(t, err)
		ids = append(ids, m.Header.Get(events.HeaderMsgID))
	}
	return ids
}

func idsOf(msgs []bus.Msg) []string {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.ID
	}
	return ids
}

// TestPublishStoresEveryMessageOnce: 300 events and 5 work messages in one
// call are stored in order, every header kept, each acknowledged; published
// again with new ones behind them, every message is there exactly once.
func TestPublishStoresEveryMessageOnce(t *testing.T) {
	conn := testenv.NATS(t)
	replies := replySpy(t, conn)
	ctx := context.Background()

	msgs := eventMsgs(0, 300)
	for i := range 5 {
		msgs = append(msgs, bus.Msg{Subject: events.SubjectDue, EventType: events.TypeTaskDue, Data: []byte(fmt.Sprint(i))})
	}
	require.NoError(t, conn.Publish(ctx, msgs))
	testenv.Eventually(t, 5*time.Second, "an acknowledgement per message", func() bool { return replies.Load() == int64(len(msgs)) })
	stored := storedEvents(t, conn)
	require.Equal(t, idsOf(msgs[:300]), stored, "every event, once, in order")
	work := testenv.DrainWork(t, conn, events.SubjectDue)
	require.Len(t, work, 5)

	s, err := conn.JS.Stream(ctx, events.StreamEvents)
	require.NoError(t, err)
	m, err := s.GetMsg(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, events.TypeTaskTransferred, m.Header.Get(events.HeaderEventType))
	require.Equal(t, `{"n":0}`, string(m.Data))

	again := append(eventMsgs(0, 300), eventMsgs(300, 350)...)
	require.NoError(t, conn.Publish(ctx, again))
	require.Equal(t, idsOf(again), storedEvents(t, conn), "repeats dropped, new ones stored once")
}

// reconfigure changes a stream's configuration as another process might.
func reconfigure(t *testing.T, conn *bus.Conn, stream string, change func(*jetstream.StreamConfig)) {
	t.Helper()
	ctx := context.Background()
	s, err := conn.JS.Stream(ctx, stream)
	require.NoError(t, err)
	cfg := s.CachedInfo().Config
	change(&cfg)
	_, err = conn.JS.UpdateStream(ctx, cfg)
	require.NoError(t, err)
}

// TestPublishRefusedMessage: a message the stream refuses among others is
// reported, and all the others are stored.
func TestPublishRefusedMessage(t *testing.T) {
	conn := testenv.NATS(t)
	ctx := context.Background()
	reconfigure(t, conn, events.StreamEvents, func(cfg *jetstream.StreamConfig) { cfg.MaxMsgSize = 1024 })

	msgs := eventMsgs(0, 40)
	msgs[20].Data = []byte(strings.Repeat("x", 2048))
	err := conn.Publish(ctx, msgs)
	require.Error(t, err)
	require.Contains(t, err.Error(), "maximum")
	want := idsOf(append(append([]bus.Msg{}, msgs[:20]...), msgs[21:]...))
	require.Equal(t, want, storedEvents(t, conn))
}

// silence puts in AX_EVENTS's place a subscriber that takes every message
// and never answers: a publish sent there waits for an answer that does
// not come.
func silence(t *testing.T, conn *bus.Conn) {
	t.Helper()
	require.NoError(t, conn.JS.DeleteStream(context.Background(), events.StreamEvents))
	sink, err := nats.Connect(conn.URL)
	require.NoError(t, err)
	t.Cleanup(sink.Close)
	_, err = sink.Subscribe(events.EventsSubjects, func(*nats.Msg) {})
	require.NoError(t, err)
	require.NoError(t, sink.Flush())
}

// TestPublishUnanswered: publishes whose answers never come end with the
// caller's deadline, and with an error as soon as the connection drops,
// never by hanging.
func TestPublishUnanswered(t *testing.T) {
	srv, conn := testenv.NATSServer(t)
	silence(t, conn)
	msgs := eventMsgs(0, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, conn.Publish(ctx, msgs), context.DeadlineExceeded)

	done := make(chan error, 1)
	go func() { done <- conn.Publish(context.Background(), msgs) }()
	time.Sleep(200 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("returned before any answer: %v", err)
	default:
	}
	srv.Shutdown()
	select {
	case err := <-done:
		require.ErrorIs(t, err, nats.ErrDisconnected)
	case <-time.After(5 * time.Second):
		t.Fatal("still waiting after the connection dropped")
	}
}

// TestPublishWithoutDeadlineIsBounded: a caller without a deadline whose
// publishes are never answered, on a connection that stays up, gets an
// error after publishWaitMax instead of waiting for ever.
func TestPublishWithoutDeadlineIsBounded(t *testing.T) {
	conn := testenv.NATS(t)
	silence(t, conn)
	defer func(d time.Duration) { *bus.PublishWaitMax = d }(*bus.PublishWaitMax)
	*bus.PublishWaitMax = 300 * time.Millisecond
	for _, n := range []int{10, 1} {
		err := conn.Publish(context.Background(), eventMsgs(0, n))
		require.ErrorIs(t, err, context.DeadlineExceeded, "%d message(s)", n)
	}
}
