package bench

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"math"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSidesRunInABBAOrder(t *testing.T) {
	plain := Config{}
	require.False(t, plain.Compare())
	require.Equal(t, []string{""}, plain.sidesAt(1))
	require.Equal(t, []string{""}, plain.sidesAt(2))
	require.Equal(t, []string{""}, plain.sides())

	for name, c := range map[string]Config{
		"flags":  {VsAxFlags: []string{"--outcome-writers=2"}},
		"binary": {VsAxBin: "/opt/ax-old"},
	} {
		t.Run(name, func(t *testing.T) {
			require.True(t, c.Compare())
			var order []string
			for rep := 1; rep <= 4; rep++ {
				order = append(order, c.sidesAt(rep)...)
			}
			require.Equal(t, []string{SideA, SideB, SideB, SideA, SideA, SideB, SideB, SideA}, order,
				"neither side always goes first")
			require.Equal(t, []string{SideA, SideB}, c.sides(), "the report's order")
		})
	}
}

func TestSideConfig(t *testing.T) {
	cfg := Config{AxBin: "/bin/ax-new", AxFlags: []string{"--fetchers=1"}, VsAxBin: "/bin/ax-old",
		VsAxFlags: []string{"--outcome-writers=2", "--claim-after=0"}, Logger: slog.New(slog.DiscardHandler)}
	a := cfg.sideConfig(SideA)
	require.Equal(t, "/bin/ax-new", a.AxBin)
	require.Equal(t, []string{"--fetchers=1"}, a.AxFlags)
	b := cfg.sideConfig(SideB)
	require.Equal(t, "/bin/ax-old", b.AxBin)
	require.Equal(t, []string{"--fetchers=1", "--outcome-writers=2", "--claim-after=0"}, b.AxFlags, "B's flags come last, so they win")
	require.Equal(t, []string{"--fetchers=1"}, cfg.AxFlags, "the shared flags are not changed by B's")
	require.Equal(t, SideB, b.side)

	flagsOnly := Config{AxBin: "/bin/ax", VsAxFlags: []string{"--fetchers=1"}, Logger: slog.New(slog.DiscardHandler)}
	require.Equal(t, "/bin/ax", flagsOnly.sideConfig(SideB).AxBin, "without --vs-ax-bin both sides run the same ax")

	require.Contains(t, settingsOf(&b, Retry), Setting{"ax_bin", "/bin/ax-old"})
	require.Contains(t, settingsOf(&b, Retry), Setting{"ax_flags", "--fetchers=1 --outcome-writers=2 --claim-after=0"})
	require.NotContains(t, settingsOf(&a, Retry), Setting{"ax_bin", "/bin/ax-new"}, "A runs the ax running bench")
}

func TestCompareNeedsLocalMode(t *testing.T) {
	cfg := validConfig()
	cfg.API, cfg.NATSURL = "http://127.0.0.1:8080", "nats://127.0.0.1:4222"
	require.NoError(t, cfg.Validate())
	cfg.VsAxFlags = []string{"--fetchers=1"}
	require.ErrorContains(t, cfg.Validate(), "--vs-ax-flag need local mode")
}

// compared is what Run returns for a retry workload run on two sides over
// three reps.
func compared() []Result {
	side := func(s string, totals, cpu []float64) Result {
		r := Result{Workload: Retry, Side: s, Reps: 3, byRep: map[int][]Metric{}}
		for i := range totals {
			r.byRep[i+1] = []Metric{{mRetryTotal, totals[i]}, {mTasks, 2000}}
			if !math.IsNaN(cpu[i]) { // NaN: not measured in that rep
				r.byRep[i+1] = append(r.byRep[i+1], Metric{prefixCPUPerTask + cpuTotalName, cpu[i]})
			}
		}
		r.Metrics = aggregate(Retry, nil, inRepOrder(r.byRep)).Metrics
		return r
	}
	return []Result{
		side(SideA, []float64{0.80, 0.90, 0.70}, []float64{0.5, 0.6, math.NaN()}),
		side(SideB, []float64{0.85, 0.60, 0.65}, []float64{0.4, 0.7, 0.5}),
	}
}

func TestCompare(t *testing.T) {
	cs := Compare(compared())
	require.Len(t, cs, 2, "headline figures only: tasks is no figure to compare")
	total := cs[0]
	require.Equal(t, Comparison{Workload: Retry, Metric: mRetryTotal, A: 0.80, B: 0.65, ChangePct: total.ChangePct,
		BetterB: 2, Pairs: 3}, total, "B was faster in reps 2 and 3, slower in rep 1")
	require.InDelta(t, -18.75, total.ChangePct, 1e-9)
	cpu := cs[1]
	require.Equal(t, prefixCPUPerTask+cpuTotalName, cpu.Metric)
	require.Equal(t, 1, cpu.BetterB)
	require.Equal(t, 2, cpu.Pairs, "a rep one side did not measure is no pair")

	// Higher is better for rates.
	a := Result{Workload: Throughput, Side: SideA, Metrics: []Metric{{mE2ETPS, 100}}, byRep: map[int][]Metric{1: {{mE2ETPS, 100}}}}
	b := Result{Workload: Throughput, Side: SideB, Metrics: []Metric{{mE2ETPS, 120}}, byRep: map[int][]Metric{1: {{mE2ETPS, 120}}}}
	require.Equal(t, []Comparison{{Workload: Throughput, Metric: mE2ETPS, A: 100, B: 120, ChangePct: 20, BetterB: 1, Pairs: 1}},
		Compare([]Result{a, b}))

	nan := Result{Workload: Throughput, Side: SideA, Metrics: []Metric{{mE2ETPS, 100}}, byRep: map[int][]Metric{1: {{mE2ETPS, math.NaN()}}}}
	require.Zero(t, Compare([]Result{nan, b})[0].Pairs, "a rep that measured no number is no pair")

	require.Empty(t, Compare(sampleResults()), "no sides, nothing to compare")
	require.Empty(t, Compare([]Result{a}), "one side alone")
	require.True(t, math.IsNaN(changePct(0, 1)), "no change from nothing")
}

func TestWriteComparisons(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, Write(&b, FormatTable, compared()))
	out := b.String()
	require.Contains(t, out, "| retry (A) |")
	require.Contains(t, out, "| retry (B) |")
	require.Contains(t, out, "- retry (B): not measured")
	require.Contains(t, out, "\n- retry: retry_total_s 0.80 → 0.65 (-18.8 %, B better in 2 of 3); "+
		"cpu_ms_per_task.total 0.55 → 0.50 (-9.1 %, B better in 1 of 2)\n")

	lines := jsonLines(t, compared())
	require.Len(t, lines, 3, "each side, then the side by side")
	var side struct {
		Workload string `json:"workload"`
		Side     string `json:"side"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[1]), &side))
	require.Equal(t, Retry, side.Workload)
	require.Equal(t, SideB, side.Side)
	var sbs struct {
		Workload   string                    `json:"workload"`
		SideBySide map[string]jsonComparison `json:"side_by_side"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines[2]), &sbs))
	got := sbs.SideBySide[mRetryTotal]
	require.Equal(t, 0.8, *got.A)
	require.Equal(t, 0.65, *got.B)
	require.Equal(t, -18.75, *got.ChangePct)
	require.Equal(t, 2, got.BetterB)
	require.Equal(t, 3, got.Pairs)
}

// validConfig is a remote-mode configuration Validate accepts.
func validConfig() Config {
	return Config{Workloads: []string{Retry}, N: 1, Rate: 1, Duration: 1, RetryN: 1, Concurrency: 1, Reps: 1,
		BatchSize: 1, BatchWorkers: 1, MaxInFlight: 1, StallTimeout: 1, MySQLDSN: MySQLDSNDefault}
}
