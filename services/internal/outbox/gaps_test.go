package outbox_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/outbox"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// eventIDOf reads the event ID of history row id.
func eventIDOf(t *testing.T, st *store.Store, id int64) string {
	t.Helper()
	var eventID string
	require.NoError(t, st.DB().QueryRow(`SELECT event_id FROM task_history WHERE id = ?`, id).Scan(&eventID))
	return eventID
}

// TestALateRowWhosePublishFailsGoesOutOnTheNextPass: a row that turns up
// in a passed hole stays watched until its event is acknowledged, so a
// pass whose publish fails leaves it to the next one.
func TestALateRowWhosePublishFailsGoesOutOnTheNextPass(t *testing.T) {
	st, _ := testenv.Store(t)
	conn := testenv.NATS(t)
	ctx := context.Background()
	publish := func(ctx context.Context, rows []store.OutboxRow) error {
		msgs := make([]bus.Msg, 0, len(rows))
		for _, r := range rows {
			msgs = append(msgs, bus.Msg{Subject: r.Subject, ID: r.EventID, Data: r.Payload})
		}
		return bus.PublishBatch(ctx, conn.JS, msgs)
	}
	gaps := store.NewHistoryGaps(time.Millisecond, 0)
	cursor, err := st.RelayCursor(ctx)
	require.NoError(t, err)

	before := insertHistory(ctx, t, st.DB(), 0)
	rollbackHistory(t, st, 1) // ID before+1 never commits
	after := insertHistory(ctx, t, st.DB(), 0)
	testenv.Eventually(t, 5*time.Second, "the hole is passed", func() bool {
		res, err := st.RelayHistory(ctx, cursor, 100, gaps, publish)
		require.NoError(t, err)
		cursor = res.Next
		return cursor == after
	})
	require.Equal(t, 1, gaps.Watched())

	late := eventIDOf(t, st, insertHistory(ctx, t, st.DB(), before+1))
	failed := errors.New("publish failed")
	testenv.Eventually(t, 5*time.Second, "a pass finds the late row and fails to publish it", func() bool {
		var had bool
		_, err := st.RelayHistory(ctx, cursor, 100, gaps, func(_ context.Context, rows []store.OutboxRow) error {
			for _, r := range rows {
				had = had || r.EventID == late
			}
			return failed
		})
		if !had {
			require.NoError(t, err)
			return false
		}
		require.ErrorIs(t, err, failed)
		return true
	})
	testenv.Eventually(t, 5*time.Second, "a later pass publishes it", func() bool {
		_, err := st.RelayHistory(ctx, cursor, 100, gaps, publish)
		require.NoError(t, err)
		_, ok := streamEventIDs(t, conn.JS)[late]
		return ok
	})
	require.Zero(t, gaps.Watched(), "and only then is its hole forgotten")
}

// TestAWatchedHoleSurvivesAHandOver: the holes a relay passed and still
// watches are stored with its cursor, so a relay that takes the lease over
// publishes a row that turns up in one of them afterwards.
func TestAWatchedHoleSurvivesAHandOver(t *testing.T) {
	st, _ := testenv.Store(t)
	conn := testenv.NATS(t)
	ctx := context.Background()
	cfg := outbox.Config{GapGrace: time.Millisecond, LeaseTTL: 300 * time.Millisecond}
	first := outbox.New(withHolder(cfg, "first"), st, conn, testenv.Logger(t))
	second := outbox.New(withHolder(cfg, "second"), st, conn, testenv.Logger(t))

	before := insertHistory(ctx, t, st.DB(), 0)
	rollbackHistory(t, st, 2) // IDs before+1, before+2 never commit
	insertHistory(ctx, t, st.DB(), 0)
	testenv.Eventually(t, 5*time.Second, "first passes the hole and stores its cursor", func() bool {
		_, err := first.RunOnce(ctx)
		require.NoError(t, err)
		return backlog(t, st) == 0
	})

	// first stops here, holding the lease; second takes over once it lapses.
	testenv.Eventually(t, 10*time.Second, "second takes the lease over", func() bool {
		_, err := second.RunOnce(ctx)
		require.NoError(t, err)
		return leaseHolder(t, st) == "second"
	})
	late := eventIDOf(t, st, insertHistory(ctx, t, st.DB(), before+2))
	testenv.Eventually(t, 5*time.Second, "second publishes the row that turned up in first's hole", func() bool {
		_, err := second.RunOnce(ctx)
		require.NoError(t, err)
		_, ok := streamEventIDs(t, conn.JS)[late]
		return ok
	})
}
