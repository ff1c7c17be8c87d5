package store_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestMigrationsGoDownAndUpAgain reverts every migration one at a time,
// newest first, then applies them all again, and the schema works: every
// .down.sql undoes its .up.sql far enough for the .up.sql to run again.
func TestMigrationsGoDownAndUpAgain(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.MigratedDSN(t) // at the latest version, as a user who may change it
	st, err := store.Status(ctx, dsn)
	require.NoError(t, err)
	require.Positive(t, st.Latest)

	err = store.MigrateDownTo(ctx, dsn, st.Latest+1)
	require.ErrorContains(t, err, "above the applied version")
	after, err := store.Status(ctx, dsn)
	require.NoError(t, err)
	require.Equal(t, st.Latest, after.Version, "a refused target changes nothing")

	// Versions may have gaps (a number given up at a merge), so the walk
	// goes through the embedded versions, not through every integer.
	versions := embeddedVersions(t)
	require.Equal(t, st.Latest, versions[len(versions)-1])
	for i := len(versions) - 2; i >= -1; i-- {
		var v uint
		if i >= 0 {
			v = versions[i]
		}
		require.NoError(t, store.MigrateDownTo(ctx, dsn, v), "down to %d", v)
		now, err := store.Status(ctx, dsn)
		require.NoError(t, err)
		require.EqualValues(t, v, now.Version)
		require.False(t, now.Dirty)
	}
	require.ErrorContains(t, store.MigrateDownTo(ctx, dsn, 0), "no migration is applied")

	require.NoError(t, store.Migrate(ctx, dsn))
	now, err := store.Status(ctx, dsn)
	require.NoError(t, err)
	require.Equal(t, st.Latest, now.Version)

	s, err := store.Open(ctx, dsn, store.Options{Actor: "test"})
	require.NoError(t, err)
	defer s.Close()
	task, _, err := s.CreateTask(ctx, store.NewTask{ID: 1, Type: "ax.noop", Priority: contracts.PriorityNormal,
		Status: contracts.StatusReady, NextRunTimeMs: 1, MaxRetries: 3, TimeoutMs: 1000, Reason: "test"})
	require.NoError(t, err)
	cursor, ok, err := s.TakeRelayLease(ctx, "test", 0, store.NewHistoryGaps(0, 0))
	require.NoError(t, err)
	require.True(t, ok)
	res, err := s.RelayHistory(ctx, cursor, 10, store.NewHistoryGaps(0, 0), func(context.Context, []store.OutboxRow) error { return nil })
	require.NoError(t, err)
	require.Equal(t, 1, res.Relayed, "the event of task %d", task.ID)
}

// embeddedVersions lists the migration versions in order.
func embeddedVersions(t *testing.T) []uint {
	t.Helper()
	return testenv.MigrationVersions(t)
}
