package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// The two sides of a comparison (Config.Compare): A runs as configured,
// B with VsAxBin and VsAxFlags.
const (
	SideA = "A"
	SideB = "B"
)

// Compare reports whether cfg runs two sides of every rep.
func (c *Config) Compare() bool { return c.VsAxBin != "" || len(c.VsAxFlags) > 0 }

// sidesAt is the order the sides run in at rep (from 1): A then B in odd
// reps, B then A in even ones (ABBA). On this kind of machine the first
// run of a fixed pair can win or lose by its place alone, so neither side
// always goes first. Without a comparison there is one unnamed side.
func (c *Config) sidesAt(rep int) []string {
	switch {
	case !c.Compare():
		return []string{""}
	case rep%2 == 1:
		return []string{SideA, SideB}
	default:
		return []string{SideB, SideA}
	}
}

// sides lists the sides in report order.
func (c *Config) sides() []string {
	if !c.Compare() {
		return []string{""}
	}
	return []string{SideA, SideB}
}

// sideConfig is cfg as side runs it: B starts VsAxBin (when set) and
// passes VsAxFlags after AxFlags, so they win.
func (c Config) sideConfig(side string) Config {
	c.side = side
	if side == "" {
		return c
	}
	c.Logger = c.Logger.With("side", side)
	if side == SideB {
		if c.VsAxBin != "" {
			c.AxBin = c.VsAxBin
		}
		c.AxFlags = append(slices.Clone(c.AxFlags), c.VsAxFlags...)
	}
	return c
}

// Comparison is side B against side A for one figure of one workload: the
// medians, B's change in per cent of A's, and in how many reps B did
// better than A in the same rep (of the reps both sides measured it).
type Comparison struct {
	Workload  string
	Metric    string
	A, B      float64
	ChangePct float64
	BetterB   int
	Pairs     int
}

// headline are the figures a comparison sets side by side, in this order:
// each workload's own targets and the CPU they cost.
var headline = []string{
	mE2ETPS, mProcessTPS, "latency_p50_ms", "latency_p99_ms", "delayed_p99_ms", "early_count", mRetryTotal,
	mChainsPerS, mChainsVsSingle, mChainsVsSingleEqualSpeed, "release_p99_ms", "fire_lateness_p99_ms",
	prefixCPUPerTask + cpuTotalName, prefixCPUPerTask + "ax", prefixCPUPerTask + "mysql", prefixCPUPerTask + "nats",
}

// higherIsBetter are the headline figures that improve upwards; the others
// (times, CPU, counts of early tasks) improve downwards.
var higherIsBetter = []string{mE2ETPS, mProcessTPS, mChainsPerS, mChainsVsSingle, mChainsVsSingleEqualSpeed}

// Compare sets the B side of each workload in results against its A side,
// headline figures only; results without sides give none.
func Compare(results []Result) []Comparison {
	var out []Comparison
	for _, a := range results {
		if a.Side != SideA {
			continue
		}
		i := slices.IndexFunc(results, func(r Result) bool { return r.Workload == a.Workload && r.Side == SideB })
		if i < 0 {
			continue
		}
		b := results[i]
		for _, name := range headline {
			va, aok := a.Metric(name)
			vb, bok := b.Metric(name)
			if !aok || !bok {
				continue
			}
			c := Comparison{Workload: a.Workload, Metric: name, A: va, B: vb, ChangePct: changePct(va, vb)}
			for rep, ma := range a.byRep {
				x, xok := Result{Metrics: ma}.Metric(name)
				y, yok := Result{Metrics: b.byRep[rep]}.Metric(name)
				if !xok || !yok || math.IsNaN(x) || math.IsNaN(y) {
					continue
				}
				c.Pairs++
				if better(name, y, x) {
					c.BetterB++
				}
			}
			out = append(out, c)
		}
	}
	return out
}

// changePct is b's change from a in per cent of a; NaN when a is 0 or
// either is not a number.
func changePct(a, b float64) float64 {
	if a == 0 || math.IsNaN(a) || math.IsNaN(b) {
		return math.NaN()
	}
	return 100 * (b - a) / a
}

// better reports whether figure name is better at v than at than.
func better(name string, v, than float64) bool {
	if slices.Contains(higherIsBetter, name) {
		return v > than
	}
	return v < than
}

// writeComparisons prints the side-by-side lines of the table format.
func writeComparisons(b *strings.Builder, results []Result) {
	cs := Compare(results)
	if len(cs) == 0 {
		return
	}
	b.WriteString("\nSide by side, B against A (medians; the reps in which B did better than A in the same rep):\n\n")
	for i := 0; i < len(cs); {
		w := cs[i].Workload
		var parts []string
		for ; i < len(cs) && cs[i].Workload == w; i++ {
			c := cs[i]
			parts = append(parts, fmt.Sprintf("%s %s → %s (%s, B better in %d of %d)",
				c.Metric, formatNumber(c.A), formatNumber(c.B), formatChange(c.ChangePct), c.BetterB, c.Pairs))
		}
		fmt.Fprintf(b, "- %s: %s\n", w, strings.Join(parts, "; "))
	}
}

// jsonComparison is one figure of a FormatJSON side-by-side line.
type jsonComparison struct {
	A         *float64 `json:"a"`
	B         *float64 `json:"b"`
	ChangePct *float64 `json:"change_pct"`
	BetterB   int      `json:"b_better"`
	Pairs     int      `json:"reps"`
}

// writeJSONComparisons adds one line per compared workload:
// {"workload": ..., "side_by_side": {figure: {a, b, change_pct, b_better,
// reps}}}; a figure that is not a number is null.
func writeJSONComparisons(enc *json.Encoder, results []Result) error {
	cs := Compare(results)
	for i := 0; i < len(cs); {
		w := cs[i].Workload
		figures := map[string]jsonComparison{}
		for ; i < len(cs) && cs[i].Workload == w; i++ {
			c := cs[i]
			figures[c.Metric] = jsonComparison{A: finite(c.A), B: finite(c.B), ChangePct: finite(c.ChangePct),
				BetterB: c.BetterB, Pairs: c.Pairs}
		}
		line := struct {
			Workload   string                    `json:"workload"`
			SideBySide map[string]jsonComparison `json:"side_by_side"`
		}{w, figures}
		if err := enc.Encode(line); err != nil {
			return fmt.Errorf("encode %s comparison: %w", w, err)
		}
	}
	return nil
}

// finite is v rounded to three decimals, or nil when JSON cannot hold it.
func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	r := math.Round(v*1000) / 1000
	return &r
}

// formatChange prints a change in per cent with its sign.
func formatChange(pct float64) string {
	if math.IsNaN(pct) {
		return "n/a"
	}
	return fmt.Sprintf("%+.1f %%", pct)
}
