package reaper_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/membership"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
	"github.com/axsched/ax/services/reaper"
)

// The reaper's read of the registry sets the cluster gauges: executors by
// state, live executors per type (0 for a registered type nobody serves),
// and the shards each live node owns, which together cover the ring; a
// node that goes away takes its shard series with it.
func TestReaperPublishesTheClusterView(t *testing.T) {
	st, _ := testenv.Store(t)
	rdb, k := testenv.Redis(t)
	ctx := context.Background()
	require.NoError(t, st.RegisterType(ctx, store.TaskType{Name: "test.orphan", TimeoutMs: 1000, MaxRetries: 1}))
	now := time.Now()
	for _, n := range []contracts.Node{
		{Name: "a", Types: []string{"test.mail"}, LastHeartbeat: now},
		{Name: "b", Types: []string{"test.mail", "test.sms"}, LastHeartbeat: now},
		{Name: "gone", Types: []string{"test.fax"}, LastHeartbeat: now.Add(-time.Minute)},
	} {
		require.NoError(t, membership.Beat(ctx, rdb, k.Nodes(), n))
	}
	r := reaper.New(reaper.Config{Shards: 16}, st, rdb, k, &manualClock{now: now}, testenv.Logger(t))
	_, err := r.RecoverDeadNodes(ctx)
	require.NoError(t, err)

	require.Equal(t, 2.0, testutil.ToFloat64(metrics.ClusterExecutors.WithLabelValues("alive")))
	require.Equal(t, 1.0, testutil.ToFloat64(metrics.ClusterExecutors.WithLabelValues("dead")))
	for typ, want := range map[string]float64{"test.mail": 2, "test.sms": 1, "test.fax": 0, "test.orphan": 0} {
		require.Equal(t, want, testutil.ToFloat64(metrics.ClusterTypeExecutors.WithLabelValues(typ)), typ)
	}
	a := testutil.ToFloat64(metrics.ClusterShardsOwned.WithLabelValues("a", "test.mail"))
	b := testutil.ToFloat64(metrics.ClusterShardsOwned.WithLabelValues("b", "test.mail"))
	require.Equal(t, 16.0, a+b, "the live owners of a type hold every shard")
	require.Positive(t, a)
	require.Equal(t, 16.0, testutil.ToFloat64(metrics.ClusterShardsOwned.WithLabelValues("b", "test.sms")))

	require.NoError(t, membership.Leave(ctx, rdb, k.Nodes(), "a"))
	_, err = r.RecoverDeadNodes(ctx)
	require.NoError(t, err)
	require.Equal(t, 16.0, testutil.ToFloat64(metrics.ClusterShardsOwned.WithLabelValues("b", "test.mail")))
	require.False(t, metrics.ClusterShardsOwned.DeleteLabelValues("a", "test.mail"), "the departed node's series stayed")
}
