package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Metric is one named figure.
type Metric struct {
	Name  string
	Value float64
}

// Setting is one parameter a workload ran with, printed next to its
// figures so a row can be reproduced.
type Setting struct {
	Key   string
	Value any
}

// Result is one workload's figures over every rep.
type Result struct {
	Workload string
	Settings []Setting
	Reps     int
	// Side is SideA or SideB in a comparison (Config.Compare), else empty.
	Side string
	// Metrics are in print order: the workload's own figures, the checks,
	// then the per-process costs.
	Metrics []Metric
	// byRep holds each rep's own figures by rep number, which a
	// comparison pairs with the other side's of the same rep.
	byRep map[int][]Metric
}

// Metric returns the named figure.
func (r Result) Metric(name string) (float64, bool) {
	for _, m := range r.Metrics {
		if m.Name == name {
			return m.Value, true
		}
	}
	return 0, false
}

// Counters of things that must not happen. Over several reps they report
// the worst rep, not the median, so that one bad rep is never hidden.
var mustBeZero = []string{mMissing, mDuplicates, mDropped, mEarly, mSubmitErrors, mRanWhilePaused}

// aggregate folds the metrics of every rep into one Result: the median of
// each figure, the worst value of each must-be-zero counter.
func aggregate(workload string, settings []Setting, reps [][]Metric) Result {
	var order []string
	values := map[string][]float64{}
	for _, rep := range reps {
		for _, m := range rep {
			if _, seen := values[m.Name]; !seen {
				order = append(order, m.Name)
			}
			values[m.Name] = append(values[m.Name], m.Value)
		}
	}
	r := Result{Workload: workload, Settings: settings, Reps: len(reps)}
	for _, name := range order {
		v := Median(values[name])
		if slices.Contains(mustBeZero, name) {
			v = slices.Max(values[name])
		}
		r.Metrics = append(r.Metrics, Metric{Name: name, Value: v})
	}
	return r
}

// Output formats.
const (
	FormatTable = "table"
	FormatJSON  = "json"
)

// Write prints results as a Markdown table with one row per workload
// followed by per-process cost lines (FormatTable), or as one JSON object
// per workload per line (FormatJSON).
func Write(w io.Writer, format string, results []Result) error {
	switch format {
	case FormatTable:
		return writeTable(w, results)
	case FormatJSON:
		return writeJSON(w, results)
	default:
		return fmt.Errorf("output %q: want %s or %s", format, FormatTable, FormatJSON)
	}
}

// isCost tells the per-process cost metrics from the workload's figures.
func isCost(name string) bool {
	return strings.HasPrefix(name, prefixCPU) || strings.HasPrefix(name, prefixRSS) || name == mWindow
}

func writeTable(w io.Writer, results []Result) error {
	var b strings.Builder
	b.WriteString("| workload | settings | results |\n|---|---|---|\n")
	for _, r := range results {
		var settings, figures []string
		for _, s := range r.Settings {
			settings = append(settings, fmt.Sprintf("%s=%v", s.Key, s.Value))
		}
		if r.Reps > 1 {
			settings = append(settings, fmt.Sprintf("reps=%d (median)", r.Reps))
		}
		for _, m := range r.Metrics {
			if !isCost(m.Name) {
				figures = append(figures, m.Name+"="+formatNumber(m.Value))
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", labelOf(r), strings.Join(settings, " "), strings.Join(figures, ", "))
	}
	b.WriteString("\nPer-process cost over each measured window (CPU seconds; peak RSS in MB from VmHWM):\n\n")
	for _, r := range results {
		fmt.Fprintf(&b, "- %s: %s\n", labelOf(r), costLine(r))
	}
	writeComparisons(&b, results)
	_, err := io.WriteString(w, b.String())
	return err
}

// labelOf names a result's row: its workload, and its side in a
// comparison ("retry (B)").
func labelOf(r Result) string {
	if r.Side == "" {
		return r.Workload
	}
	return r.Workload + " (" + r.Side + ")"
}

// costLine reads "window 12.3 s; ax 4.5 cpu_s 120 MB; mysql 3.2 cpu_s; ...".
func costLine(r Result) string {
	var parts []string
	if v, ok := r.Metric(mWindow); ok {
		parts = append(parts, "window "+formatNumber(v)+" s")
	}
	for _, m := range r.Metrics {
		proc, ok := strings.CutPrefix(m.Name, prefixCPU)
		if !ok {
			continue
		}
		part := proc + " " + formatNumber(m.Value) + " cpu_s"
		if rss, ok := r.Metric(prefixRSS + proc); ok {
			part += " " + formatNumber(rss) + " MB"
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return "not measured"
	}
	return strings.Join(parts, "; ")
}

// jsonLine is the shape of one FormatJSON line.
type jsonLine struct {
	Workload string             `json:"workload"`
	Side     string             `json:"side,omitempty"`
	Reps     int                `json:"reps"`
	Settings map[string]any     `json:"settings"`
	Metrics  map[string]float64 `json:"metrics"`
}

func writeJSON(w io.Writer, results []Result) error {
	enc := json.NewEncoder(w)
	for _, r := range results {
		line := jsonLine{Workload: r.Workload, Side: r.Side, Reps: r.Reps, Settings: map[string]any{}, Metrics: map[string]float64{}}
		for _, s := range r.Settings {
			line.Settings[s.Key] = s.Value
		}
		for _, m := range r.Metrics {
			if math.IsNaN(m.Value) || math.IsInf(m.Value, 0) {
				continue // JSON has no NaN; a missing key says "not measured"
			}
			line.Metrics[m.Name] = math.Round(m.Value*1000) / 1000
		}
		if err := enc.Encode(line); err != nil {
			return fmt.Errorf("encode %s result: %w", r.Workload, err)
		}
	}
	return writeJSONComparisons(enc, results)
}

// formatNumber prints integers as integers and other values with about
// three significant digits, which is all a benchmark figure is good for.
func formatNumber(v float64) string {
	switch a := math.Abs(v); {
	case math.IsNaN(v):
		return "n/a"
	case v == math.Trunc(v) && a < 1e15:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}
