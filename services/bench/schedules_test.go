package bench

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSchedulesWorkload runs the schedules workload at a tiny size: every
// fire time of the window is fired, once, none early.
func TestSchedulesWorkload(t *testing.T) {
	cfg := tinyLocalConfig(t, Schedules)
	cfg.SchedulesN, cfg.Duration = 20, 3*time.Second
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	results, err := Run(ctx, cfg)
	require.NoError(t, err)
	require.Len(t, results, 1)
	metric := func(name string) float64 {
		v, ok := results[0].Metric(name)
		require.True(t, ok, "%s missing", name)
		return v
	}
	require.GreaterOrEqual(t, metric(mFires), 20.0*3)
	require.Zero(t, metric(mEarly))
	require.Zero(t, metric(mMissing))
	require.Positive(t, metric(mFireLateness+"_p99_ms"))
}
