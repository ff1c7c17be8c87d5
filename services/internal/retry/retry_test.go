package retry_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/retry"
)

// TestDelayDistribution computes 1,000 delays per retry number: all lie in
// [base·2ⁿ, 1.5·base·2ⁿ] (capped) and they are not all equal.
func TestDelayDistribution(t *testing.T) {
	base, cap := time.Second, 30*time.Second
	for n := range 7 {
		want := min(base<<n, cap)
		seen := map[time.Duration]bool{}
		lo, hi := time.Duration(1<<62), time.Duration(0)
		for range 1000 {
			d := retry.Delay(n, base, cap, nil)
			require.GreaterOrEqual(t, d, want, "retry %d", n)
			require.LessOrEqual(t, d, want+want/2, "retry %d", n)
			seen[d] = true
			lo, hi = min(lo, d), max(hi, d)
		}
		require.Greater(t, len(seen), 100, "retry %d: jitter must spread delays", n)
		// The spread should use most of the 50 % band.
		require.Greater(t, hi-lo, want*4/10, "retry %d: spread %s..%s", n, lo, hi)
	}
}

func TestDelayBounds(t *testing.T) {
	zero := func() float64 { return 0 }
	almostOne := func() float64 { return 0.999999 }
	tests := []struct {
		n         int
		base, cap time.Duration
		jitter    func() float64
		want      time.Duration
	}{
		{0, time.Second, time.Minute, zero, time.Second},
		{1, time.Second, time.Minute, zero, 2 * time.Second},
		{3, 100 * time.Millisecond, time.Minute, zero, 800 * time.Millisecond},
		{10, time.Second, 5 * time.Second, zero, 5 * time.Second},
		{100, time.Second, time.Minute, zero, time.Minute},
		{-1, time.Second, time.Minute, zero, time.Second},
		{0, time.Second, time.Minute, almostOne, 1499999 * time.Microsecond},
		{0, 0, 0, zero, retry.BaseDefault},
	}
	for _, tc := range tests {
		got := retry.Delay(tc.n, tc.base, tc.cap, tc.jitter)
		require.InDelta(t, float64(tc.want), float64(got), float64(time.Microsecond), "n=%d base=%s cap=%s", tc.n, tc.base, tc.cap)
	}
}

func TestPlan(t *testing.T) {
	noJitter := func() float64 { return 0 }
	base := retry.Failure{TaskID: 1, Type: "t", Attempt: 2, MaxRetries: 3, Status: contracts.StatusFailed, Error: "boom", Reason: "failed"}
	policy := retry.Policy{BackoffBase: time.Second, BackoffCap: time.Minute}

	steps := retry.Plan(base, policy, 1000, noJitter)
	require.Len(t, steps, 2)
	require.Equal(t, contracts.StatusFailed, steps[0].To)
	require.Equal(t, contracts.StatusRetrying, steps[1].To)
	require.True(t, steps[1].IncrementRetry)
	require.EqualValues(t, 2000, *steps[1].NextRunTimeMs)
	require.Nil(t, steps[0].Also, "no dead letter while retries remain")

	last := base
	last.RetryCount = 3
	steps = retry.Plan(last, policy, 1000, noJitter)
	require.Len(t, steps, 1)
	require.NotNil(t, steps[0].Also, "dead letter when out of retries")
	require.Contains(t, steps[0].Reason, "no retries left")

	perm := base
	perm.Permanent = true
	steps = retry.Plan(perm, policy, 1000, noJitter)
	require.Len(t, steps, 1)
	require.NotNil(t, steps[0].Also)
	require.Contains(t, steps[0].Reason, "not retryable")

	silent := retry.Plan(last, retry.Policy{FailSilently: true}, 1000, noJitter)
	require.Len(t, silent, 1)
	require.Nil(t, silent[0].Also, "fail-silently types file no dead letter")

	timeout := base
	timeout.Status = contracts.StatusTimeout
	steps = retry.Plan(timeout, policy, 1000, noJitter)
	require.Equal(t, contracts.StatusTimeout, steps[0].To)
	require.Equal(t, contracts.StatusTimeout, steps[1].From)
}
