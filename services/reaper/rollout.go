package reaper

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/lease"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/rollout"
	"github.com/axsched/ax/services/internal/store"
)

// Rollout guard: one reaper at a time (the holder of keys.RolloutLease)
// compares each running rollout's canary with its stable executors and
// moves it: back to 0 % at once on a breach, a step up once the current
// step has held for its time. Every move is fenced by the rollout's
// revision, so a guard that lost its lease mid-pass, or an operator's move
// in between, makes its move a conflict instead of a second change.

// rolloutLeaseTTL is how long the guard's lease lasts unless renewed; the
// holder renews it every pass (every second by default).
const rolloutLeaseTTL = 15 * time.Second

// samplesKept is how long rollout samples are kept at least; a longer
// window keeps them twice the window.
const samplesKept = time.Hour

// GuardRollouts makes one guard pass if this reaper holds (or takes) the
// lease, and returns how many rollouts it moved.
func (r *Reaper) GuardRollouts(ctx context.Context) (int, error) {
	key, holder := r.keys.RolloutLease(), r.cfg.Retention.Holder
	if holder == "" {
		holder = "reaper"
	}
	ok, err := r.rdb.SetNX(ctx, key, holder, rolloutLeaseTTL).Result()
	if err != nil {
		return 0, fmt.Errorf("take rollout lease: %w", err)
	}
	if !ok {
		n, err := lease.Renew.Run(ctx, r.rdb, []string{key}, holder, rolloutLeaseTTL.Milliseconds()).Int()
		if err != nil || n != 1 {
			return 0, err // another reaper guards
		}
	}
	ros, err := r.store.Rollouts(ctx)
	if err != nil {
		return 0, err
	}
	moved := 0
	keep := samplesKept
	var errs []error
	for _, ro := range ros {
		// The percent of every rollout, moved by anyone, is published by
		// the guard alone, so replicas never disagree for long.
		metrics.RolloutPercent.WithLabelValues(ro.Type).Set(float64(ro.Percent))
		if ro.State != contracts.RolloutRunning {
			continue
		}
		keep = max(keep, 2*ro.Window)
		ok, err := r.guard(ctx, ro)
		if ok {
			moved++
		}
		errs = append(errs, err)
	}
	if time.Since(r.lastSamplesPrune) >= time.Minute {
		r.lastSamplesPrune = time.Now()
		if _, err := r.store.PruneRolloutSamples(ctx, keep, 10000); err != nil {
			errs = append(errs, err)
		}
	}
	return moved, errors.Join(errs...)
}

// guard judges one running rollout and moves it when the verdict says so.
func (r *Reaper) guard(ctx context.Context, ro *store.Rollout) (bool, error) {
	c, s, v, err := rollout.Measure(ctx, r.store, ro)
	if err != nil {
		return false, err
	}
	observe(ro, c, s)
	// Steps are timed by the processes' clocks (a step's start is written
	// by the one that moved it), kept in step by NTP like every ax host's.
	now := time.Now().UTC()
	action := rollout.Decide(ro, v, now)
	if action == "" {
		return false, nil
	}
	moved, err := r.store.MoveRollout(ctx, ro.Type, ro.Revision, func(ro *store.Rollout) (store.RolloutMove, error) {
		rollout.Apply(ro, action, now)
		return store.RolloutMove{Action: action, Reason: "guard: " + v.Reason, Figures: rollout.Figures(c, s, v)}, nil
	})
	if errors.Is(err, store.ErrConflict) {
		return false, nil // moved by someone else meanwhile; judged again next pass
	}
	if err != nil {
		return false, err
	}
	rollout.Count(moved, action, "guard")
	r.logger.Warn("rollout moved by its guard", "type", ro.Type, "version", ro.Version, "action", action,
		"percent", moved.Percent, "reason", v.Reason)
	return true, nil
}

// observe publishes what the guard saw.
func observe(ro *store.Rollout, c, s contracts.VersionStats) {
	for side, st := range map[string]contracts.VersionStats{"canary": c, "stable": s} {
		metrics.RolloutRuns.WithLabelValues(ro.Type, side).Set(float64(st.Runs))
		metrics.RolloutFailureRate.WithLabelValues(ro.Type, side).Set(st.FailureRate)
		metrics.RolloutTimeoutRate.WithLabelValues(ro.Type, side).Set(st.TimeoutRate)
		metrics.RolloutP99Seconds.WithLabelValues(ro.Type, side).Set(float64(st.P99Ms) / 1000)
	}
}
