package outbox_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/outbox"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

var ids atomic.Int64

func create(t testing.TB, st *store.Store) {
	t.Helper()
	_, _, err := st.CreateTask(context.Background(), store.NewTask{
		ID: ids.Add(1), Type: "ax.noop", Priority: contracts.PriorityNormal, Status: contracts.StatusReady,
		NextRunTimeMs: 1, MaxRetries: 3, TimeoutMs: 1000, Reason: "test",
	})
	if err != nil {
		t.Error(err)
	}
}

// streamEventIDs reads every message of AX_EVENTS and returns the event IDs
// (Nats-Msg-Id) with how often each occurs.
func streamEventIDs(t *testing.T, js jetstream.JetStream) map[string]int {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, events.StreamEvents)
	require.NoError(t, err)
	info, err := s.Info(ctx)
	require.NoError(t, err)
	out := map[string]int{}
	if info.State.Msgs == 0 {
		return out
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	for uint64(len(out)) < info.State.Msgs {
		batch, err := c.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		require.NoError(t, err)
		n := 0
		for m := range batch.Messages() {
			out[m.Headers().Get(events.HeaderMsgID)]++
			n++
		}
		if n == 0 {
			break
		}
	}
	return out
}

func historyEventIDs(t *testing.T, st *store.Store) map[string]bool {
	t.Helper()
	rows, err := st.DB().Query(`SELECT event_id FROM task_history`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		out[id] = true
	}
	return out
}

func backlog(t *testing.T, st *store.Store) int64 {
	t.Helper()
	n, err := st.OutboxBacklog(context.Background())
	require.NoError(t, err)
	return n
}

// TestConcurrentProducersLoseNoEvent is the gap test: rows committed out of
// ID order while two relays run must all reach the stream, once each.
func TestConcurrentProducersLoseNoEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 transactions")
	}
	st, _ := testenv.Store(t)
	conn := testenv.NATS(t)
	logger := testenv.Logger(t)

	ctx, cancel := context.WithCancel(context.Background())
	var relays sync.WaitGroup
	for range 2 {
		r := outbox.New(outbox.Config{Batch: 200}, st, conn.JS, logger)
		relays.Go(func() { _ = r.Run(ctx) })
	}

	const producers, each = 8, 1250
	start := time.Now()
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for range each {
				create(t, st)
			}
		})
	}
	wg.Wait()
	produced := time.Since(start)
	testenv.Eventually(t, 60*time.Second, "outbox drained", func() bool { return backlog(t, st) == 0 })
	cancel()
	relays.Wait()
	t.Logf("%d transfers by %d producers in %s (%.0f/s), relayed by two relays", producers*each, producers, produced,
		float64(producers*each)/produced.Seconds())

	got := streamEventIDs(t, conn.JS)
	want := historyEventIDs(t, st)
	require.Len(t, want, producers*each)
	require.Len(t, got, producers*each, "exactly one stream message per transfer")
	for id, n := range got {
		require.Equal(t, 1, n, "event %s stored %d times", id, n)
		require.True(t, want[id], "event %s has no history row", id)
	}
}

// TestRelayCrashRedeliversWithoutDuplicates kills the relay (returns an
// error, so the transaction rolls back) before and after publishing; a
// restarted relay delivers everything, and the stream holds each event once.
func TestRelayCrashRedeliversWithoutDuplicates(t *testing.T) {
	st, _ := testenv.Store(t)
	conn := testenv.NATS(t)
	ctx := context.Background()
	for range 100 {
		create(t, st)
	}
	crash := errors.New("relay killed")

	// Killed between reading and publishing.
	_, err := st.RelayOutbox(ctx, 1000, func(context.Context, []store.OutboxRow) error { return crash })
	require.ErrorIs(t, err, crash)
	require.EqualValues(t, 100, backlog(t, st))
	require.Empty(t, streamEventIDs(t, conn.JS))

	// Killed after publishing half of a batch, then after publishing all.
	for _, part := range []int{50, 100} {
		_, err = st.RelayOutbox(ctx, 1000, func(ctx context.Context, rows []store.OutboxRow) error {
			msgs := make([]bus.Msg, 0, part)
			for _, r := range rows[:part] {
				msgs = append(msgs, bus.Msg{Subject: r.Subject, ID: r.EventID, Data: r.Payload})
			}
			require.NoError(t, bus.PublishBatch(ctx, conn.JS, msgs))
			return crash
		})
		require.ErrorIs(t, err, crash)
		require.EqualValues(t, 100, backlog(t, st), "nothing deleted by a crashed pass")
	}

	r := outbox.New(outbox.Config{}, st, conn.JS, testenv.Logger(t))
	n, err := r.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 100, n)
	require.Zero(t, backlog(t, st))

	got := streamEventIDs(t, conn.JS)
	require.Len(t, got, 100)
	for id, c := range got {
		require.Equal(t, 1, c, "event %s stored %d times", id, c)
	}
	require.Equal(t, historyEventIDs(t, st), func() map[string]bool {
		m := map[string]bool{}
		for id := range got {
			m[id] = true
		}
		return m
	}())
}
