package bench

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every CPU figure of a window is also given per task, in milliseconds;
// a window without a task count gives none.
func TestCostPerTask(t *testing.T) {
	busy := 0
	for i := range 20_000_000 { // some CPU for the harness to have used
		busy += i % 7
	}
	require.Positive(t, busy)
	for _, tc := range []struct {
		name  string
		tasks int
	}{{"per task", 4}, {"no tasks", 0}} {
		t.Run(tc.name, func(t *testing.T) {
			m := startCosts(nil, slog.New(slog.DiscardHandler))
			for i := range 20_000_000 {
				busy += i % 7
			}
			out := Result{Metrics: m.stop(tc.tasks)}
			cpu, ok := out.Metric(prefixCPU + harnessName)
			require.True(t, ok)
			per, ok := out.Metric(prefixCPUPerTask + harnessName)
			if tc.tasks == 0 {
				require.False(t, ok)
				return
			}
			require.True(t, ok)
			require.InDelta(t, cpu*1000/float64(tc.tasks), per, 1e-9)
			total, _ := out.Metric(prefixCPUPerTask + cpuTotalName)
			require.Zero(t, total, "no process but the harness, which is not in the total")
		})
	}
}
