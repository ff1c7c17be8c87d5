package reaper_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/testenv"
	"github.com/axsched/ax/services/reaper"
)

// TestReaperPrunesIdempotencyKeysPastRetention: keys older than the
// retention go, younger ones stay.
func TestReaperPrunesIdempotencyKeysPastRetention(t *testing.T) {
	ctx := context.Background()
	st, _ := testenv.Store(t)
	rdb, k := testenv.Redis(t)
	for i, age := range []string{"40 DAY", "31 DAY", "31 DAY", "29 DAY", "1 SECOND"} {
		_, err := st.DB().ExecContext(ctx, `INSERT INTO idempotency_keys (scope, idem_key, task_id, attempt, created_at)
			VALUES ('t', ?, 1, 1, NOW(3) - INTERVAL `+age+`)`, []byte{byte('a' + i)})
		require.NoError(t, err)
	}
	r := reaper.New(reaper.Config{IdempotencyRetention: 30 * 24 * time.Hour}, st, rdb, k, &manualClock{now: time.Now()}, testenv.Logger(t))
	n, err := r.PruneIdempotencyKeys(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	var left int
	require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM idempotency_keys`).Scan(&left))
	require.Equal(t, 2, left)
}
