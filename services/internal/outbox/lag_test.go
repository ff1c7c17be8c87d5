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
	st, _ := testenv.Store(t)
	conn := testenv.NATS(t)
	ctx := context.Background()
	for range 10 {
		create(t, st)
	}
	_, err := st.DB().ExecContext(ctx, `UPDATE task_history SET created_at = created_at - INTERVAL 3 SECOND`)
	require.NoError(t, err)

	count, sum := metrics.Observed(metrics.RelayLag)
	n, err := outbox.New(outbox.Config{}, st, conn, testenv.Logger(t)).RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 10, n)
	count2, sum2 := metrics.Observed(metrics.RelayLag)
	require.EqualValues(t, 10, count2-count, "one observation per published event")
	require.InDelta(t, 3.0, (sum2-sum)/10, 0.5, "each event 3 s after its row")
}
