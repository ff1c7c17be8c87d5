package rollout_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/rollout"
	"github.com/axsched/ax/services/internal/store"
)

// The share of 1,000 business keys that lands on the canary is within ±3
// points of every step's percent, and a key on the canary at one step
// stays there at every higher one.
func TestCanaryShareAndStickiness(t *testing.T) {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "order-" + strconv.Itoa(i)
	}
	prev := map[string]bool{}
	for _, pct := range []int{0, 1, 5, 10, 30, 50, 100} {
		on := 0
		for _, k := range keys {
			c := rollout.OnCanary(k, pct)
			if c {
				on++
			}
			if prev[k] {
				require.True(t, c, "key %s left the canary when the percent rose to %d", k, pct)
			}
			prev[k] = c
			require.Equal(t, c, rollout.OnCanary(k, pct), "the same key, the same answer")
		}
		share := float64(on) / float64(len(keys)) * 100
		require.InDelta(t, float64(pct), share, 3, "share at %d %%", pct)
	}
}

func TestQuantileNearestRank(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tc := range []struct {
		name string
		d    []time.Duration
		q    float64
		want time.Duration
	}{
		{"empty", nil, 0.99, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"p50 of four", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"p99 of 100 is the 99th", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"p99 of 10 is the slowest", ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 0.99, 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, rollout.Quantile(tc.d, tc.q))
		})
	}
}

// samples makes n samples of version: fails failed and timeouts timed
// out, the rest succeed; durations are 1..n ms times scale.
func samples(version string, n, failed, timeouts int, scale float64) []store.RolloutSample {
	out := make([]store.RolloutSample, n)
	for i := range out {
		o := "success"
		switch {
		case i < failed:
			o = "failed"
		case i < failed+timeouts:
			o = "timeout"
		}
		out[i] = store.RolloutSample{Version: version, Outcome: o, Duration: time.Duration(float64(i+1)*scale) * time.Millisecond}
	}
	return out
}

func TestStatsSplitsCanaryFromEveryOtherVersion(t *testing.T) {
	all := append(samples("v2", 100, 3, 1, 1), samples("v1", 150, 0, 0, 1)...)
	all = append(all, samples("dev", 50, 5, 0, 1)...)
	c, s := rollout.Stats(all, "v2")
	require.Equal(t, 100, c.Runs)
	require.InDelta(t, 0.03, c.FailureRate, 1e-9)
	require.InDelta(t, 0.01, c.TimeoutRate, 1e-9)
	require.Equal(t, int64(50), c.P50Ms)
	require.Equal(t, int64(99), c.P99Ms)
	require.Equal(t, 200, s.Runs, "every version but the canary is stable")
	require.InDelta(t, 0.025, s.FailureRate, 1e-9)
}

func TestJudge(t *testing.T) {
	ro := &store.Rollout{Version: "v2", MinSamples: 100, MaxP99Worse: 0.10, MaxFailureDiff: 0.02, MaxTimeoutDiff: 0.02}
	for _, tc := range []struct {
		name   string
		canary []store.RolloutSample
		want   string
	}{
		{"too few canary runs", samples("v2", 99, 0, 0, 5), rollout.Insufficient},
		{"equal", samples("v2", 200, 0, 0, 1), rollout.Holds},
		{"p99 9 % slower holds", samples("v2", 200, 0, 0, 1.09), rollout.Holds},
		{"p99 20 % slower breaches", samples("v2", 200, 0, 0, 1.2), rollout.Breach},
		{"failures 3 points worse breach", samples("v2", 200, 6, 0, 1), rollout.Breach},
		{"failures 2 points worse hold", samples("v2", 200, 4, 0, 1), rollout.Holds},
		{"timeouts 5 points worse breach", samples("v2", 200, 0, 10, 1), rollout.Breach},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, s := rollout.Stats(append(tc.canary, samples("v1", 200, 0, 0, 1)...), "v2")
			v := rollout.Judge(ro, c, s)
			require.Equal(t, tc.want, v.Verdict, v.Reason)
		})
	}
}

func TestDecide(t *testing.T) {
	start := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	holds := contracts.RolloutVerdict{Verdict: rollout.Holds}
	breach := contracts.RolloutVerdict{Verdict: rollout.Breach}
	waiting := contracts.RolloutVerdict{Verdict: rollout.Insufficient}
	ro := func(step int, state string) *store.Rollout {
		return &store.Rollout{Steps: []int{5, 50, 100}, StepIndex: step, State: state, StepTime: time.Minute, StepStartedAt: start}
	}
	for _, tc := range []struct {
		name string
		ro   *store.Rollout
		v    contracts.RolloutVerdict
		at   time.Duration
		want string
	}{
		{"breach rolls back at once", ro(0, contracts.RolloutRunning), breach, time.Second, rollout.ActionRollback},
		{"holds, step not over", ro(0, contracts.RolloutRunning), holds, 59 * time.Second, ""},
		{"holds for the step", ro(0, contracts.RolloutRunning), holds, time.Minute, rollout.ActionAdvance},
		{"too few runs never advance", ro(0, contracts.RolloutRunning), waiting, time.Hour, ""},
		{"last step held: promoted", ro(2, contracts.RolloutRunning), holds, time.Minute, rollout.ActionPromote},
		{"paused is left alone", ro(0, contracts.RolloutPaused), breach, time.Hour, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, rollout.Decide(tc.ro, tc.v, start.Add(tc.at)))
		})
	}
	r := ro(0, contracts.RolloutRunning)
	rollout.Apply(r, rollout.ActionAdvance, start)
	require.Equal(t, 50, r.Percent)
	rollout.Apply(r, rollout.ActionRollback, start)
	require.Equal(t, 0, r.Percent)
	require.Equal(t, contracts.RolloutRolledBack, r.State)
}
