package app_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestReadyMeansConsuming: when a process reports ready (the start-up
// callback, which fires when /readyz would first pass), every consumer its
// services pull is already declared, so work sent at that moment is taken.
func TestReadyMeansConsuming(t *testing.T) {
	_, k := testenv.Redis(t)
	sys := startSystem(t, "127.0.0.1:6379", k.Prefix, nil)
	ctx := context.Background()
	conn, err := bus.Connect(ctx, sys.natsURL, "ready-check")
	require.NoError(t, err)
	defer conn.Close()

	want := []string{events.ConsumerTimer, events.ConsumerTimerRetrying, events.ConsumerTimerTypes, events.ConsumerDispatcher}
	for _, lane := range contracts.Priorities {
		want = append(want,
			events.ExecConsumer("ax.noop", lane, events.NodeToken("e2e")),
			events.ExecConsumer("ax.noop", lane, events.SharedToken))
	}
	for _, name := range want {
		stream := events.StreamWork
		switch name {
		case events.ConsumerTimer, events.ConsumerTimerRetrying, events.ConsumerTimerTypes:
			stream = events.StreamEvents
		}
		_, err := conn.JS.Consumer(ctx, stream, name)
		require.NoError(t, err, "consumer %s declared before ready", name)
	}
	_, err = conn.JS.Consumer(ctx, events.StreamWork, "no-such-consumer")
	require.ErrorIs(t, err, jetstream.ErrConsumerNotFound, "the check can fail")
}
