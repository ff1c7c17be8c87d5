package outbox_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/outbox"
	"github.com/axsched/ax/services/internal/testenv"
)

// The relay's lag is measured from when each row was written: rows written
// 3 s before the relay ran read as 3 s late, one observation per event.
func TestRelayLagIsMeasuredFromTheRowsWriteTime(t *testing.T) {
	st, conn := withTasks(t, 10)
	ctx := context.Background()
	_, err := st.DB().ExecContext(ctx, `UPDATE task_history SET created_at = created_at - INTERVAL 3 SECOND`)
	require.NoError(t, err)

	count, sum := metrics.Observed(metrics.RelayLag)
	n, err := outbox.New(outbox.Config{}, st, conn, testenv.Logger(t)).RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 10, n)
	count2, sum2 := metrics.Observed(metrics.RelayLag)
	require.EqualValues(t, 10, count2-count, "one observation per published event")
	// At least the 3 s the rows were backdated; the rest is this test's
	// own time between writing and relaying, short even on a busy machine.
	lag := (sum2 - sum) / 10
	require.GreaterOrEqual(t, lag, 2.95, "each event at least 3 s after its row")
	require.Less(t, lag, 6.0, "each event about 3 s after its row")
}
