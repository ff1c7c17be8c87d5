package bench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/testenv"
)

// tinyLocalConfig runs workload on a fresh local ax, at the smallest sizes
// the other workloads allow.
func tinyLocalConfig(t *testing.T, workload string) Config {
	dir := binDir(t)
	dsn := mysqlServer(t)
	rdb, _ := testenv.Redis(t)
	return Config{
		Workloads: []string{workload}, Rate: 1, Duration: 2 * time.Second, Delay: time.Second,
		N: 1, RetryN: 1, Concurrency: 4, Reps: 1, BatchSize: 50, BatchWorkers: 2, MaxInFlight: 100, StallTimeout: time.Minute,
		AxBin: filepath.Join(dir, "ax"), NATSServer: filepath.Join(dir, "nats-server"), Topology: TopologyUp,
		MySQLDSN: dsn, RedisAddr: rdb.Options().Addr, Logger: testenv.Logger(t).With("test", t.Name()),
	}
}

// TestRetentionWorkload runs the retention workload at a tiny size: the
// seeded tasks stay while pruning is off, and go while it is on, under a
// latency workload whose every task is reported exactly once.
func TestRetentionWorkload(t *testing.T) {
	cfg := tinyLocalConfig(t, Retention)
	cfg.RetentionN, cfg.Rate, cfg.Concurrency = 3000, 50, 16
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	results, err := Run(ctx, cfg)
	require.NoError(t, err)
	require.Len(t, results, 1)
	r := results[0]
	metric := func(name string) float64 {
		v, ok := r.Metric(name)
		require.True(t, ok, "%s missing", name)
		return v
	}
	for _, name := range []string{"off.latency_p99_ms", "on.latency_p99_ms", "off.latency_p50_ms", "on.latency_p50_ms"} {
		require.Positive(t, metric(name), name)
	}
	require.Equal(t, 3000.0, metric(mSeeded))
	require.Zero(t, metric(retentionOff+mPruned), "pruning off deletes nothing")
	require.Less(t, metric(mSeededLeft), 3000.0, "pruning on has deleted seeded tasks by the window's end")
	for _, name := range []string{mMissing, mDuplicates, mDropped} {
		require.Zero(t, metric(name), name)
	}
}
