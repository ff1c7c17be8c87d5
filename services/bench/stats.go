package bench

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 < p <= 100) of sorted values by
// the nearest-rank method: the smallest value with at least p % of the
// values at or below it. Nearest rank never invents a value that was not
// measured, which matters for a max-like p99 of a few hundred samples. An
// empty input gives NaN.
func Percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// Median returns the middle of values (the mean of the two middle ones for
// an even count) without reordering the caller's slice; NaN when empty.
// Reps are summarised by their median so that one disturbed rep does not
// move the figure. A NaN (a rep that could not measure the figure) is left
// out: sorted first, it would pass for the smallest value.
func Median(values []float64) float64 {
	s := slices.DeleteFunc(slices.Clone(values), math.IsNaN)
	if len(s) == 0 {
		return math.NaN()
	}
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// latencyMetrics names the usual latency summary of samples in
// milliseconds: prefix_p50_ms and so on for each percentile, and
// prefix_max_ms.
func latencyMetrics(prefix string, samplesMs []float64, percentiles ...float64) []Metric {
	s := sortedCopy(samplesMs)
	var out []Metric
	for _, p := range percentiles {
		out = append(out, Metric{Name: prefix + "_p" + formatNumber(p) + "_ms", Value: Percentile(s, p)})
	}
	return append(out, Metric{Name: prefix + "_max_ms", Value: Percentile(s, 100)})
}

func sortedCopy(v []float64) []float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s
}

// ms converts a duration in nanoseconds to milliseconds.
func ms(ns int64) float64 { return float64(ns) / float64(time.Millisecond) }

// rate is count per second over d; 0 when d is not positive.
func rate(count int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(count) / d.Seconds()
}
