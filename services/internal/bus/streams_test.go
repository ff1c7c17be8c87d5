package bus_test

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

// TestEnsureStreamsRemovesTheObsoleteReadyConsumer: the durable consumer
// an older ax declared for READY events (nobody pulls it any more) is
// removed when streams are declared, and declaring again with it gone is
// no error.
func TestEnsureStreamsRemovesTheObsoleteReadyConsumer(t *testing.T) {
	conn := testenv.NATS(t)
	ctx := context.Background()
	_, err := conn.JS.CreateOrUpdateConsumer(ctx, events.StreamEvents, jetstream.ConsumerConfig{
		Durable: events.ObsoleteConsumerDispatcherReady, FilterSubject: events.TaskEventSubject(contracts.StatusReady),
		AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	_, err = conn.JS.Consumer(ctx, events.StreamEvents, events.ObsoleteConsumerDispatcherReady)
	require.NoError(t, err, "declared as an older ax did")

	require.NoError(t, bus.EnsureStreams(ctx, conn.JS, bus.StreamOptions{}))
	_, err = conn.JS.Consumer(ctx, events.StreamEvents, events.ObsoleteConsumerDispatcherReady)
	require.ErrorIs(t, err, jetstream.ErrConsumerNotFound)
	require.NoError(t, bus.EnsureStreams(ctx, conn.JS, bus.StreamOptions{}))
}
