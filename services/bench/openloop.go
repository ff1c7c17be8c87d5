package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/axsched/ax/contracts"
)

// latency submits tasks due at once in an open loop and measures handler
// start minus submit call start.
func (r *run) latency(ctx context.Context) ([]Metric, error) {
	return r.openLoopWorkload(ctx, contracts.SubmitRequest{Type: TypeBench}, mLatency,
		func(s sent, started int64) float64 { return ms(started - s.startNs) }, 50, 90, 99)
}

// delayed submits tasks due Delay after submission and measures handler
// start minus the due time the API answered; a start before it is early.
func (r *run) delayed(ctx context.Context) ([]Metric, error) {
	return r.openLoopWorkload(ctx, contracts.SubmitRequest{Type: TypeBench, Delay: r.cfg.Delay.String()}, mDelayed,
		func(s sent, started int64) float64 { return ms(started - s.dueNs) }, 50, 99)
}

// openLoopWorkload runs the open loop with req, waits for every accepted
// task and summarises of(sent, handler start) under prefix. The delayed
// workload also counts early starts.
func (r *run) openLoopWorkload(ctx context.Context, req contracts.SubmitRequest, prefix string,
	of func(s sent, startedNs int64) float64, percentiles ...float64) ([]Metric, error) {
	r.startCosts()
	out, elapsed := r.openLoop(ctx, req)
	var ids []int64
	var calls, lags []float64
	failed := 0
	for _, s := range out {
		lags = append(lags, ms(int64(s.lag)))
		if s.failed {
			failed++
			continue
		}
		ids = append(ids, s.id)
		calls = append(calls, ms(int64(s.call)))
	}
	r.logger.Info("open loop done; waiting for the handlers", "submitted", len(ids), "failed", failed)
	werr := r.col.wait(ctx, ids, r.cfg.StallTimeout)
	costs := r.meter.stop(len(ids))
	var samples []float64
	early, finished := 0, 0
	var firstNs, lastNs int64
	for _, s := range out {
		if s.failed {
			continue
		}
		runs := r.col.runsOf(s.id)
		if !runs.hasFirst {
			continue
		}
		samples = append(samples, of(s, runs.first.StartNs))
		if s.dueNs > 0 && runs.first.StartNs < s.dueNs {
			early++
		}
		if runs.hasSucc {
			finished++
			firstNs = minNonZero(firstNs, s.startNs)
			lastNs = max(lastNs, runs.success.EndNs)
		}
	}
	figures := latencyMetrics(prefix, samples, percentiles...)
	switch prefix {
	case mDelayed:
		figures = append(figures, Metric{Name: mEarly, Value: float64(early)})
	case mLatency:
		figures = append(figures, Metric{Name: mTasksPerS, Value: rate(finished, time.Duration(lastNs-firstNs))})
	}
	figures = append(figures, latencyMetrics(mSubmitCall, calls, 50, 99)...)
	figures = append(figures,
		Metric{Name: mSubmitLag, Value: Percentile(sortedCopy(lags), 100)},
		Metric{Name: mAchieved, Value: rate(len(ids), elapsed)},
		Metric{Name: mSubmitErrors, Value: float64(failed)})
	if prefix == mLatency {
		hops, err := r.hopMetrics(ctx, ids)
		if err != nil {
			r.logger.Warn("per-hop latency incomplete", "err", err)
		}
		figures = append(figures, hops...)
	}
	t := r.col.tally(ids)
	return join(figures, t.metrics(len(ids), r.col.dropped()), costs), werr
}

// retry submits RetryN tasks whose first attempt fails, with the type's
// backoff at its smallest, and measures until the last retry succeeded.
func (r *run) retry(ctx context.Context) (_ []Metric, err error) {
	prev, err := r.api.GetType(ctx, TypeBench)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", TypeBench, err)
	}
	least := contracts.MinTypeDuration.String()
	if _, err := r.api.UpdateType(ctx, TypeBench, contracts.TaskTypeUpdate{BackoffBase: &least, BackoffCap: &least}); err != nil {
		return nil, fmt.Errorf("set %s backoff to %s: %w", TypeBench, least, err)
	}
	defer func() { // a deployment gets its settings back
		_, rerr := r.api.UpdateType(context.WithoutCancel(ctx), TypeBench,
			contracts.TaskTypeUpdate{BackoffBase: &prev.BackoffBase, BackoffCap: &prev.BackoffCap})
		err = errors.Join(err, rerr)
	}()
	if err := sleep(ctx, typeSettle); err != nil {
		return nil, err
	}
	n := r.cfg.RetryN
	r.startCosts()
	t0 := time.Now()
	ids, err := r.submitBatches(ctx, benchTasks(n, `{"fail_attempts":1}`))
	if err != nil {
		return nil, err
	}
	werr := r.col.wait(ctx, ids, r.cfg.StallTimeout)
	costs := r.meter.stop(n)
	t := r.col.tally(ids)
	var gaps []float64
	for _, id := range ids {
		if runs := r.col.runsOf(id); runs.hasSucc && runs.hasFailed {
			gaps = append(gaps, ms(runs.success.StartNs-runs.failed.EndNs))
		}
	}
	total := math.NaN()
	if t.lastEndNs > 0 {
		total = time.Duration(t.lastEndNs - t0.UnixNano()).Seconds()
	}
	figures := append([]Metric{{Name: mRetryTotal, Value: total}}, latencyMetrics(mRetryGap, gaps, 50, 99)...)
	return join(figures, t.metrics(n, r.col.dropped()), costs), werr
}

// minNonZero is the smaller of a and b, a being unset while zero.
func minNonZero(a, b int64) int64 {
	if a == 0 || b < a {
		return b
	}
	return a
}
