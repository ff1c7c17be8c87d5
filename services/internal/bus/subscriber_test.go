package bus_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestRouterStopsCleanlyWhileMessagesArrive stops a router consuming
// through AddConsumer again and again while its messages keep coming. A
// subscription that closed its output while a delivery could still send on
// it would panic and crash the test binary; a message the router had not
// acknowledged when it stopped must come back to the next one, so in the
// end every message was handled.
func TestRouterStopsCleanlyWhileMessagesArrive(t *testing.T) {
	conn := testenv.NATS(t)
	logger := testenv.Logger(t)
	ctx := context.Background()

	const total = 1000
	msgs := make([]bus.Msg, total)
	for i := range msgs {
		msgs[i] = bus.Msg{Subject: events.SubjectTypeChanged, ID: strconv.Itoa(i), Data: []byte(`{}`)}
	}
	require.NoError(t, bus.PublishBatch(ctx, conn.JS, msgs))

	var mu sync.Mutex
	seen := map[string]bool{}
	handle := func(m *message.Message) error {
		time.Sleep(time.Duration(rand.IntN(1000)) * time.Microsecond)
		mu.Lock()
		seen[m.UUID] = true
		mu.Unlock()
		return nil
	}
	handled := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(seen)
	}
	// Every stop hands back what was pulled and not handled, which counts as
	// a delivery: unbounded here, so that only loss can keep a message away.
	spec := bus.ConsumerSpec{Name: "test_stop", Stream: events.StreamEvents, Subject: events.SubjectTypeChanged,
		Parallel: 2, MaxDeliver: -1}

	rounds := 0
	for handled() < total {
		rounds++
		require.Less(t, rounds, 1000, "handled %d of %d", handled(), total)
		router, err := bus.NewRouter(logger)
		require.NoError(t, err)
		require.NoError(t, bus.AddConsumer(router, conn, spec, logger, handle))
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- router.Run(rctx) }()
		<-router.Running()
		time.Sleep(time.Duration(5+rand.IntN(30)) * time.Millisecond)
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(15 * time.Second):
			t.Fatalf("round %d: the router did not stop", rounds)
		}
	}
	require.Greater(t, rounds, 3, "the router must have been stopped while messages were arriving")
	t.Logf("%d messages handled over %d stops", total, rounds)
}
