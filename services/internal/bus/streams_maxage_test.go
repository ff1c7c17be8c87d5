package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestEnsureStreamsAppliesTheEventsMaxAge: AX_EVENTS is declared with the
// configured age limit (7 days by default), and a later start with another
// limit updates the existing stream without losing its events.
func TestEnsureStreamsAppliesTheEventsMaxAge(t *testing.T) {
	conn := testenv.NATS(t)
	ctx := context.Background()
	maxAge := func() time.Duration {
		s, err := conn.JS.Stream(ctx, events.StreamEvents)
		require.NoError(t, err)
		return s.CachedInfo().Config.MaxAge
	}
	require.NoError(t, bus.EnsureStreams(ctx, conn.JS, bus.StreamOptions{}))
	require.Equal(t, 7*24*time.Hour, maxAge())
	_, err := conn.JS.Publish(ctx, events.TaskEventSubject("READY"), []byte("{}"))
	require.NoError(t, err)

	require.NoError(t, bus.EnsureStreams(ctx, conn.JS, bus.StreamOptions{EventsMaxAge: 2 * time.Hour}))
	require.Equal(t, 2*time.Hour, maxAge())
	s, err := conn.JS.Stream(ctx, events.StreamEvents)
	require.NoError(t, err)
	require.EqualValues(t, 1, s.CachedInfo().State.Msgs, "the update keeps the stream's events")
}
