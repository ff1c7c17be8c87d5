// Package rollout is the arithmetic of gray releases: which version a new
// task goes to (Bucket, OnCanary), what each version did over the guard's
// window (Stats), whether the canary is worse than the stable executors
// (Judge), and what the guard does next (Decide). It reads and writes
// nothing; the dispatcher routes by it and the reaper's guard acts on it.
package rollout

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
)

// Bucket places a routing key (a task's biz_key, or its ID when it has
// none) in 0..99. md5 spreads any key evenly, and the same key always
// lands in the same bucket in every process.
func Bucket(key string) int {
	sum := md5.Sum([]byte(key))
	return int(binary.BigEndian.Uint64(sum[:8]) % 100)
}

// OnCanary reports whether a new task with key goes to the canary at
// percent: buckets below the percent do, so raising the percent only ever
// moves keys from stable to canary, never back.
func OnCanary(key string, percent int) bool { return Bucket(key) < percent }

// Stats splits samples into the canary's and the stable executors' (every
// version but the canary) figures.
func Stats(samples []store.RolloutSample, canary string) (c, s contracts.VersionStats) {
	var cd, sd []time.Duration
	c.Version, s.Version = canary, "stable"
	count := func(v *contracts.VersionStats, ds *[]time.Duration, sm store.RolloutSample) {
		v.Runs++
		switch sm.Outcome {
		case "failed":
			v.FailureRate++
		case "timeout":
			v.TimeoutRate++
		}
		*ds = append(*ds, sm.Duration)
	}
	for _, sm := range samples {
		if sm.Version == canary {
			count(&c, &cd, sm)
		} else {
			count(&s, &sd, sm)
		}
	}
	finish := func(v *contracts.VersionStats, ds []time.Duration) {
		if v.Runs == 0 {
			return
		}
		v.FailureRate /= float64(v.Runs)
		v.TimeoutRate /= float64(v.Runs)
		slices.Sort(ds)
		v.P50Ms = Quantile(ds, 0.50).Milliseconds()
		v.P99Ms = Quantile(ds, 0.99).Milliseconds()
	}
	finish(&c, cd)
	finish(&s, sd)
	return c, s
}

// Quantile is the nearest-rank q-quantile of sorted durations: the
// smallest value at least a fraction q of them do not exceed.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// Verdicts.
const (
	Insufficient = "insufficient"
	Holds        = "holds"
	Breach       = "breach"
)

// Judge compares the canary with the stable executors under ro's guard.
// Until both sides have MinSamples runs in the window nothing is judged:
// with n runs the p99 is the n/100-th slowest, so below a few hundred runs
// it is one or two runs and says little (docs/rollout.md).
func Judge(ro *store.Rollout, c, s contracts.VersionStats) contracts.RolloutVerdict {
	if c.Runs < ro.MinSamples || s.Runs < ro.MinSamples {
		return contracts.RolloutVerdict{Verdict: Insufficient, Reason: fmt.Sprintf(
			"%d canary and %d stable runs in the window; %d each needed", c.Runs, s.Runs, ro.MinSamples)}
	}
	if s.P99Ms > 0 && float64(c.P99Ms) > float64(s.P99Ms)*(1+ro.MaxP99Worse) {
		return contracts.RolloutVerdict{Verdict: Breach, Reason: fmt.Sprintf(
			"canary p99 %d ms is more than %.0f %% above stable p99 %d ms", c.P99Ms, ro.MaxP99Worse*100, s.P99Ms)}
	}
	if c.FailureRate > s.FailureRate+ro.MaxFailureDiff {
		return contracts.RolloutVerdict{Verdict: Breach, Reason: fmt.Sprintf(
			"canary failure rate %.2f %% exceeds stable %.2f %% by more than %.2f points",
			c.FailureRate*100, s.FailureRate*100, ro.MaxFailureDiff*100)}
	}
	if c.TimeoutRate > s.TimeoutRate+ro.MaxTimeoutDiff {
		return contracts.RolloutVerdict{Verdict: Breach, Reason: fmt.Sprintf(
			"canary timeout rate %.2f %% exceeds stable %.2f %% by more than %.2f points",
			c.TimeoutRate*100, s.TimeoutRate*100, ro.MaxTimeoutDiff*100)}
	}
	return contracts.RolloutVerdict{Verdict: Holds, Reason: fmt.Sprintf(
		"canary p99 %d ms vs stable %d ms, failures %.2f %% vs %.2f %%, timeouts %.2f %% vs %.2f %%",
		c.P99Ms, s.P99Ms, c.FailureRate*100, s.FailureRate*100, c.TimeoutRate*100, s.TimeoutRate*100)}
}

// Actions a rollout move is logged as.
const (
	ActionStart    = "start"
	ActionAdvance  = "advance"
	ActionPromote  = "promote"
	ActionPause    = "pause"
	ActionResume   = "resume"
	ActionRollback = "rollback"
)

// Decide is what the guard does with a running rollout given its verdict
// at now: roll back on a breach, go to the next step (or finish, promoted,
// after the last) once the current step has held for its time, otherwise
// nothing ("").
func Decide(ro *store.Rollout, v contracts.RolloutVerdict, now time.Time) string {
	switch {
	case ro.State != contracts.RolloutRunning:
		return ""
	case v.Verdict == Breach:
		return ActionRollback
	case v.Verdict == Holds && now.Sub(ro.StepStartedAt) >= ro.StepTime:
		if ro.StepIndex+1 >= len(ro.Steps) {
			return ActionPromote
		}
		return ActionAdvance
	}
	return ""
}

// Apply changes ro as action says, at now; the caller stores it.
func Apply(ro *store.Rollout, action string, now time.Time) {
	switch action {
	case ActionAdvance:
		ro.StepIndex++
		ro.Percent = ro.Steps[ro.StepIndex]
		ro.StepStartedAt = now
	case ActionPromote:
		// Straight to 100 % and done: every new task goes to the canary.
		ro.StepIndex = len(ro.Steps) - 1
		ro.Percent, ro.State, ro.StepStartedAt = 100, contracts.RolloutPromoted, now
	case ActionPause:
		ro.State = contracts.RolloutPaused
	case ActionResume:
		ro.State, ro.StepStartedAt = contracts.RolloutRunning, now
	case ActionRollback:
		ro.Percent, ro.State, ro.StepStartedAt = 0, contracts.RolloutRolledBack, now
	}
}

// Measure reads ro's samples over its window and judges them.
func Measure(ctx context.Context, st *store.Store, ro *store.Rollout) (c, s contracts.VersionStats, v contracts.RolloutVerdict, err error) {
	samples, err := st.RolloutSamples(ctx, ro.Type, ro.Window)
	if err != nil {
		return c, s, v, err
	}
	c, s = Stats(samples, ro.Version)
	return c, s, Judge(ro, c, s), nil
}

// Figures is the JSON of both sides and the verdict, as the rollout log
// keeps them.
func Figures(c, s contracts.VersionStats, v contracts.RolloutVerdict) string {
	data, err := json.Marshal(struct {
		Canary  contracts.VersionStats   `json:"canary"`
		Stable  contracts.VersionStats   `json:"stable"`
		Verdict contracts.RolloutVerdict `json:"verdict"`
	}{c, s, v})
	if err != nil {
		return ""
	}
	return string(data)
}

// Count records a stored move in the counters; trigger is guard or
// manual. The percent gauge is the guard's to publish (every pass).
func Count(ro *store.Rollout, action, trigger string) {
	if trigger == "guard" {
		metrics.RolloutPercent.WithLabelValues(ro.Type).Set(float64(ro.Percent))
	}
	switch action {
	case ActionRollback:
		metrics.RolloutRollbacks.WithLabelValues(ro.Type, trigger).Inc()
	case ActionAdvance, ActionPromote:
		metrics.RolloutSteps.WithLabelValues(ro.Type, action).Inc()
	}
}
