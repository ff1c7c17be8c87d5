package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAggregate(t *testing.T) {
	reps := [][]Metric{
		{{mE2ETPS, 100}, {mMissing, 0}, {prefixCPU + "ax", 3}},
		{{mE2ETPS, 300}, {mMissing, 2}, {prefixCPU + "ax", 1}},
		{{mE2ETPS, 200}, {mMissing, 0}, {prefixCPU + "ax", 2}, {mEarly, 1}},
	}
	r := aggregate(Throughput, []Setting{{"n", 10}}, reps)
	require.Equal(t, 3, r.Reps)
	require.Equal(t, []Metric{
		{mE2ETPS, 200},        // median
		{mMissing, 2},         // must be zero: the worst rep
		{prefixCPU + "ax", 2}, // median
		{mEarly, 1},           // only in one rep, still the worst
	}, r.Metrics)
	v, ok := r.Metric(mE2ETPS)
	require.True(t, ok)
	require.Equal(t, 200.0, v)
	_, ok = r.Metric("nope")
	require.False(t, ok)
}

func sampleResults() []Result {
	return []Result{
		{Workload: Throughput, Reps: 1, Settings: []Setting{{"n", 50000}, {"submit", "batch"}},
			Metrics: []Metric{{mE2ETPS, 412.345}, {mDrain, 121.5}, {mMissing, 0},
				{mWindow, 121.5}, {prefixCPU + "ax", 85.25}, {prefixRSS + "ax", 310.4}, {prefixCPU + "mysql", 40}, {prefixCPU + "total", 125.25}}},
		{Workload: Delayed, Reps: 3, Settings: []Setting{{"rate", 1000}},
			Metrics: []Metric{{"delayed_p50_ms", 4.567}, {mEarly, 0}, {"delayed_max_ms", math.NaN()}}},
	}
}

func TestWriteTable(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, Write(&b, FormatTable, sampleResults()))
	want := `| workload | settings | results |
|---|---|---|
| throughput | n=50000 submit=batch | e2e_tps=412, drain_s=122, missing=0 |
| delayed | rate=1000 reps=3 (median) | delayed_p50_ms=4.57, early_count=0, delayed_max_ms=n/a |

Per-process cost over each measured window (CPU seconds; peak RSS in MB from VmHWM):

- throughput: window 122 s; ax 85.2 cpu_s 310 MB; mysql 40 cpu_s; total 125 cpu_s
- delayed: not measured
`
	require.Equal(t, want, b.String())
}

// jsonLines writes results as FormatJSON and returns its lines.
func jsonLines(t *testing.T, results []Result) []string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, Write(&b, FormatJSON, results))
	return strings.Split(strings.TrimSpace(b.String()), "\n")
}

func TestWriteJSON(t *testing.T) {
	lines := jsonLines(t, sampleResults())
	require.Len(t, lines, 2, "one object per workload per line")
	var first struct {
		Workload string             `json:"workload"`
		Reps     int                `json:"reps"`
		Settings map[string]any     `json:"settings"`
		Metrics  map[string]float64 `json:"metrics"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	require.Equal(t, Throughput, first.Workload)
	require.Equal(t, "batch", first.Settings["submit"])
	require.Equal(t, 412.345, first.Metrics[mE2ETPS])
	require.Equal(t, 85.25, first.Metrics["cpu_s.ax"])
	require.NotContains(t, lines[1], "delayed_max_ms", "a NaN is left out, JSON has none")
}

func TestWriteRejectsUnknownFormat(t *testing.T) {
	require.Error(t, Write(&bytes.Buffer{}, "xml", nil))
}

func TestFormatNumber(t *testing.T) {
	tests := []struct {
		v    float64
		want string
	}{
		{0, "0"}, {50000, "50000"}, {412.345, "412"}, {12.345, "12.3"}, {1.2345, "1.23"}, {0.0042, "0.00"},
		{-3.5, "-3.50"}, {math.NaN(), "n/a"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, formatNumber(tt.v), "%v", tt.v)
	}
}

func TestChainsShare(t *testing.T) {
	latency := func(perS float64) []Metric {
		return []Metric{{mLatency + "_p50_ms", 3}, {mTasksPerS, perS}}
	}
	chains := func(perS float64) []Metric {
		return []Metric{{mRelease + "_p50_ms", 2}, {mChainsPerS, perS}}
	}
	for name, c := range map[string]struct {
		latency, chains []Metric
		share           float64
		ok              bool
	}{
		"both ran":          {latency(6000), chains(1500), 25, true},
		"chains alone":      {nil, chains(1500), 0, false},
		"latency alone":     {latency(6000), nil, 0, false},
		"no single tasks/s": {latency(0), chains(1500), 0, false},
	} {
		t.Run(name, func(t *testing.T) {
			share, ok := chainsShare(c.latency, c.chains)
			require.Equal(t, c.ok, ok)
			require.InDelta(t, c.share, share, 1e-9)
		})
	}
}

func TestPlaceChainsShare(t *testing.T) {
	chainsRep := func(share float64) []Metric {
		return []Metric{{mRelease + "_p50_ms", 2}, {mChainsPerS, 1500}, {prefixCPU + "ax", 4}, {mChainsVsSingle, share}}
	}
	latency := Result{Workload: Latency, Metrics: []Metric{{mTasksPerS, 5000}}}
	got := []Result{latency, aggregate(Chains, nil, [][]Metric{chainsRep(52), chainsRep(40), chainsRep(45)})}
	placeChainsShare(got)
	require.Equal(t, []Metric{{mRelease + "_p50_ms", 2}, {mChainsPerS, 1500}, {mChainsVsSingle, 45}, {prefixCPU + "ax", 4}},
		got[1].Metrics, "the median of the reps' shares, after chains_per_s")
	require.Equal(t, latency, got[0], "the latency figures are left alone")

	none := []Result{latency, {Workload: Chains, Metrics: []Metric{{mChainsPerS, 1500}, {prefixCPU + "ax", 4}}}}
	placeChainsShare(none)
	require.Equal(t, []Metric{{mChainsPerS, 1500}, {prefixCPU + "ax", 4}}, none[1].Metrics, "no rep ran both: no share")

	// In a comparison each side's chains keep their own side's shares.
	sides := []Result{
		{Workload: Chains, Side: SideA, Metrics: aggregate(Chains, nil, [][]Metric{chainsRep(40), chainsRep(44)}).Metrics},
		{Workload: Chains, Side: SideB, Metrics: aggregate(Chains, nil, [][]Metric{chainsRep(50)}).Metrics},
	}
	placeChainsShare(sides)
	require.Equal(t, []Metric{{mRelease + "_p50_ms", 2}, {mChainsPerS, 1500}, {mChainsVsSingle, 42}, {prefixCPU + "ax", 4}}, sides[0].Metrics)
	require.Equal(t, []Metric{{mRelease + "_p50_ms", 2}, {mChainsPerS, 1500}, {mChainsVsSingle, 50}, {prefixCPU + "ax", 4}}, sides[1].Metrics)
}

func TestEqualSpeedShares(t *testing.T) {
	harness := prefixCPUPerTask + harnessName
	chains := func(share, ch float64) []Metric {
		return []Metric{{mChainsPerS, 1500}, {harness, ch}, {mChainsVsSingle, share}}
	}
	latency := func(lat float64) []Metric { return []Metric{{mTasksPerS, 3000}, {harness, lat}} }
	equal := func(ms []Metric) (float64, bool) { return Result{Metrics: ms}.Metric(mChainsVsSingleEqualSpeed) }

	t.Run("drift in either half of a rep is taken out", func(t *testing.T) {
		reps := map[string]map[int][]Metric{
			// Rep 2's single tasks ran on a machine twice as slow (the
			// harness spent twice the CPU a task), which doubled its share;
			// rep 3's chains did, which halved it.
			Latency: {1: latency(0.1), 2: latency(0.2), 3: latency(0.1)},
			Chains:  {1: chains(50, 0.05), 2: chains(100, 0.05), 3: chains(25, 0.1)},
		}
		equalSpeedShares(reps, []string{""})
		for n := 1; n <= 3; n++ {
			got, ok := equal(reps[Chains][n])
			require.True(t, ok, "rep %d", n)
			require.InDelta(t, 50, got, 1e-9, "rep %d", n)
		}
	})

	t.Run("a rep without the harness's CPU gets none", func(t *testing.T) {
		reps := map[string]map[int][]Metric{
			Latency: {1: latency(0.1), 2: {{mTasksPerS, 3000}}},
			Chains:  {1: chains(48, 0.05), 2: chains(52, 0.05)},
		}
		equalSpeedShares(reps, []string{""})
		got, ok := equal(reps[Chains][1])
		require.True(t, ok)
		require.InDelta(t, 48, got, 1e-9, "the only rep is its own reference")
		_, ok = equal(reps[Chains][2])
		require.False(t, ok)
	})

	t.Run("two sides share one reference speed", func(t *testing.T) {
		// Side B's chains ran while the machine was slower: at A's speed
		// its share would have been A's.
		reps := map[string]map[int][]Metric{
			Latency + SideA: {1: latency(0.1)},
			Chains + SideA:  {1: chains(50, 0.05)},
			Latency + SideB: {1: latency(0.1)},
			Chains + SideB:  {1: chains(40, 0.0625)},
		}
		equalSpeedShares(reps, []string{SideA, SideB})
		a, _ := equal(reps[Chains+SideA][1])
		b, _ := equal(reps[Chains+SideB][1])
		require.InDelta(t, a, b, 1e-9)
	})
}

func TestPlaceChainsShareKeepsBothShares(t *testing.T) {
	rep := []Metric{{mChainsPerS, 1500}, {prefixCPU + "ax", 4}, {mChainsVsSingle, 48}, {mChainsVsSingleEqualSpeed, 46}}
	got := []Result{aggregate(Chains, nil, [][]Metric{rep})}
	placeChainsShare(got)
	require.Equal(t, []Metric{{mChainsPerS, 1500}, {mChainsVsSingle, 48}, {mChainsVsSingleEqualSpeed, 46}, {prefixCPU + "ax", 4}}, got[0].Metrics)
}
