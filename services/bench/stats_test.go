package bench

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPercentile(t *testing.T) {
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(i + 1)
	}
	tests := []struct {
		name   string
		sorted []float64
		p      float64
		want   float64
	}{
		{name: "one value is every percentile", sorted: []float64{7}, p: 99, want: 7},
		{name: "p50 of 1..100 is 50", sorted: hundred, p: 50, want: 50},
		{name: "p90 of 1..100 is 90", sorted: hundred, p: 90, want: 90},
		{name: "p99 of 1..100 is 99", sorted: hundred, p: 99, want: 99},
		{name: "p100 is the max", sorted: hundred, p: 100, want: 100},
		{name: "nearest rank rounds up", sorted: []float64{1, 2, 3, 4}, p: 60, want: 3},
		{name: "p99 of few values is the max, never interpolated", sorted: []float64{10, 20, 30}, p: 99, want: 30},
		{name: "tiny p is the min", sorted: []float64{5, 6}, p: 0.001, want: 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.want, Percentile(tt.sorted, tt.p))
		})
	}
	require.True(t, math.IsNaN(Percentile(nil, 50)), "empty input is not a number")
}

func TestMedian(t *testing.T) {
	tests := []struct {
		name   string
		values []float64
		want   float64
	}{
		{name: "one rep", values: []float64{3}, want: 3},
		{name: "odd count takes the middle", values: []float64{9, 1, 5}, want: 5},
		{name: "even count averages the middle two", values: []float64{4, 1, 3, 2}, want: 2.5},
		{name: "an outlier does not move it", values: []float64{100, 101, 9999}, want: 101},
		{name: "a rep that measured nothing is left out", values: []float64{0.6, math.NaN(), 0.5}, want: 0.55},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := append([]float64(nil), tt.values...)
			require.Equal(t, tt.want, Median(tt.values))
			require.Equal(t, fmt.Sprint(before), fmt.Sprint(tt.values), "the caller's slice keeps its order (NaN too)")
		})
	}
	require.True(t, math.IsNaN(Median(nil)))
	require.True(t, math.IsNaN(Median([]float64{math.NaN()})), "nothing measured")
}

func TestLatencyMetricsNames(t *testing.T) {
	got := latencyMetrics("delayed", []float64{3, 1, 2}, 50, 99)
	require.Equal(t, []Metric{{"delayed_p50_ms", 2}, {"delayed_p99_ms", 3}, {"delayed_max_ms", 3}}, got)
}
