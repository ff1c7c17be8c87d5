package metrics_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/metrics"
)

func newVec() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: "test_total", Help: "test"}, []string{"type", "dedup"})
}

// TestChildrenCountOnTheVector: counts made through Children are the
// vector's own series, one per key.
func TestChildrenCountOnTheVector(t *testing.T) {
	vec := newVec()
	c := metrics.NewChildren(vec, func(k metrics.SubmitKey) []string {
		if k.Deduplicated {
			return []string{k.Type, "true"}
		}
		return []string{k.Type, "false"}
	})
	c.With(metrics.SubmitKey{Type: "a"}).Inc()
	c.With(metrics.SubmitKey{Type: "a"}).Inc()
	c.With(metrics.SubmitKey{Type: "a", Deduplicated: true}).Inc()
	c.With(metrics.SubmitKey{Type: "b"}).Add(3)
	require.InDelta(t, 2, testutil.ToFloat64(vec.WithLabelValues("a", "false")), 0)
	require.InDelta(t, 1, testutil.ToFloat64(vec.WithLabelValues("a", "true")), 0)
	require.InDelta(t, 3, testutil.ToFloat64(vec.WithLabelValues("b", "false")), 0)
	require.Equal(t, 3, testutil.CollectAndCount(vec))
}

// TestPerTaskChildren: the package's caches count on the exported series.
func TestPerTaskChildren(t *testing.T) {
	before := testutil.ToFloat64(metrics.TasksSubmitted.WithLabelValues("children.test", "true"))
	metrics.SubmittedBy.With(metrics.SubmitKey{Type: "children.test", Deduplicated: true}).Inc()
	require.InDelta(t, before+1, testutil.ToFloat64(metrics.TasksSubmitted.WithLabelValues("children.test", "true")), 0)
	before = testutil.ToFloat64(metrics.Dispatched.WithLabelValues("children.test"))
	metrics.DispatchedOf.With("children.test").Inc()
	require.InDelta(t, before+1, testutil.ToFloat64(metrics.Dispatched.WithLabelValues("children.test")), 0)
}

// BenchmarkCounterWithLabelValues is the per-task count as the vector
// gives it.
func BenchmarkCounterWithLabelValues(b *testing.B) {
	vec := newVec()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			vec.WithLabelValues("ax.bench", "false").Inc()
		}
	})
}

// BenchmarkCounterChildren is the same count through Children.
func BenchmarkCounterChildren(b *testing.B) {
	vec := newVec()
	c := metrics.NewChildren(vec, func(k metrics.SubmitKey) []string { return []string{k.Type, "false"} })
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.With(metrics.SubmitKey{Type: "ax.bench"}).Inc()
		}
	})
}
