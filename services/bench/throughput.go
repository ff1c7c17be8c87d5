package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/store"
)

// typeSettle is how long a change of a task type takes to reach every
// service: their caches of type settings live at most 2 s (the executor's;
// the dispatcher's 1 s), plus a margin.
const typeSettle = 2500 * time.Millisecond

func benchTasks(n int, payload string) []contracts.SubmitRequest {
	reqs := make([]contracts.SubmitRequest, n)
	for i := range reqs {
		reqs[i] = contracts.SubmitRequest{Type: TypeBench}
		if payload != "" {
			reqs[i].Payload = []byte(payload)
		}
	}
	return reqs
}

// throughputE2E submits N no-op tasks as fast as batches go and measures
// until the last handler finished (e2e_tps) and until MySQL shows every
// task SUCCESS (drain_s).
func (r *run) throughputE2E(ctx context.Context) ([]Metric, error) {
	n := r.cfg.N
	r.startCosts()
	t0 := time.Now()
	ids, err := r.submitBatches(ctx, benchTasks(n, ""))
	if err != nil {
		return nil, err
	}
	submitted := time.Since(t0)
	r.logger.Info("submitted", "tasks", n, "in", submitted.Round(time.Millisecond))
	werr := r.col.wait(ctx, ids, r.cfg.StallTimeout)
	r.logger.Info("handlers finished; waiting for MySQL to show every task SUCCESS")
	drained, derr := r.waitDrained(ctx, ids)
	costs := r.meter.stop(n)
	t := r.col.tally(ids)
	figures := []Metric{
		{Name: mE2ETPS, Value: rateUntil(n, t0, t.lastEndNs)},
		{Name: mEnqueueTPS, Value: rate(n, submitted)},
		{Name: mDrain, Value: math.NaN()},
	}
	if derr == nil {
		figures[2].Value = drained.Sub(t0).Seconds()
	}
	return join(figures, t.metrics(n, r.col.dropped()), costs), errors.Join(werr, derr)
}

// throughputProcess submits N tasks while the type is paused, waits until
// ax is quiet, resumes the type and measures until the last handler
// finished (process_tps): processing alone, without submission competing.
func (r *run) throughputProcess(ctx context.Context) (_ []Metric, err error) {
	n := r.cfg.N
	if err := r.setPaused(ctx, true); err != nil {
		return nil, err
	}
	resumed := false
	defer func() {
		if !resumed { // never leave a deployment's type paused
			err = errors.Join(err, r.setPaused(context.WithoutCancel(ctx), false))
		}
	}()
	if err := sleep(ctx, typeSettle); err != nil {
		return nil, err
	}
	ids, err := r.submitBatches(ctx, benchTasks(n, ""))
	if err != nil {
		return nil, err
	}
	r.logger.Info("submitted while paused; waiting until ax is quiet", "tasks", n)
	if err := r.waitQuiet(ctx); err != nil {
		return nil, err
	}
	// The dispatcher's cached "paused" must expire too, or the re-indexed
	// tasks are dropped again and wait for the reconciler.
	if err := sleep(ctx, typeSettle); err != nil {
		return nil, err
	}
	t0 := time.Now()
	if err := r.setPaused(ctx, false); err != nil {
		return nil, err
	}
	resumed = true
	werr := r.col.wait(ctx, ids, r.cfg.StallTimeout)
	t := r.col.tally(ids)
	early := 0
	for _, id := range ids {
		if f := r.col.runsOf(id); f.hasFirst && f.first.StartNs < t0.UnixNano() {
			early++
		}
	}
	return join([]Metric{{Name: mProcessTPS, Value: rateUntil(n, t0, t.lastEndNs)},
		{Name: mRanWhilePaused, Value: float64(early)}}, t.metrics(n, r.col.dropped())), werr
}

// mergeProcess adds the process run's figure to the end-to-end run's and
// sums the two runs' must-be-zero counters, so the checks cover both.
func mergeProcess(e2e, proc []Metric) []Metric {
	if e2e == nil {
		return proc
	}
	procOf := func(name string) (float64, bool) {
		for _, m := range proc {
			if m.Name == name {
				return m.Value, true
			}
		}
		return 0, false
	}
	var out []Metric
	for _, m := range e2e {
		switch m.Name {
		case mMissing, mDuplicates, mDropped:
			if v, ok := procOf(m.Name); ok {
				m.Value += v
			}
		}
		out = append(out, m)
		if m.Name == mEnqueueTPS {
			v, ok := procOf(mProcessTPS)
			if !ok {
				v = math.NaN()
			}
			out = append(out, Metric{Name: mProcessTPS, Value: v})
		}
	}
	if v, ok := procOf(mRanWhilePaused); ok {
		out = append(out, Metric{Name: mRanWhilePaused, Value: v})
	}
	return out
}

func (r *run) setPaused(ctx context.Context, paused bool) error {
	if _, err := r.api.UpdateType(ctx, TypeBench, contracts.TaskTypeUpdate{Paused: &paused}); err != nil {
		return fmt.Errorf("set %s paused=%t: %w", TypeBench, paused, err)
	}
	return nil
}

// waitDrained polls MySQL until every task of ids is SUCCESS: the figure
// includes durability, not only the handlers. The poll is a range scan of
// the run's IDs, every 50 ms, once every handler has finished.
func (r *run) waitDrained(ctx context.Context, ids []int64) (time.Time, error) {
	lo, hi := ids[0], ids[0]
	for _, id := range ids {
		lo, hi = min(lo, id), max(hi, id)
	}
	const q = `SELECT COUNT(*) FROM tasks WHERE task_type = ? AND status = ? AND id BETWEEN ? AND ?`
	last, lastChange := -1, time.Now()
	for {
		var done int
		if err := r.db.QueryRowContext(ctx, q, TypeBench, contracts.StatusSuccess, lo, hi).Scan(&done); err != nil {
			return time.Time{}, fmt.Errorf("count SUCCESS tasks: %w", err)
		}
		now := time.Now()
		if done >= len(ids) {
			return now, nil
		}
		if done != last {
			last, lastChange = done, now
		} else if now.Sub(lastChange) > r.cfg.StallTimeout {
			return time.Time{}, fmt.Errorf("%d of %d tasks SUCCESS in MySQL and no change for %s", done, len(ids), r.cfg.StallTimeout)
		}
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitQuiet waits until ax has nothing in flight towards dispatch: every
// event is published (tasks due at once are dispatched with theirs) and
// the timer's and dispatcher's durable consumers have nothing pending or
// unacknowledged, on two polls in a row.
func (r *run) waitQuiet(ctx context.Context) error {
	js, err := jetstream.New(r.col.nc)
	if err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	consumers := []struct{ stream, name string }{
		{events.StreamEvents, events.ConsumerTimer}, {events.StreamWork, events.ConsumerDispatcher},
	}
	deadline := time.Now().Add(r.cfg.StallTimeout)
	for streak := 0; streak < 2; {
		busy := 0
		unpublished, err := store.CountUnpublished(ctx, r.db)
		if err != nil {
			return err
		}
		busy += int(unpublished)
		for _, c := range consumers {
			cons, err := js.Consumer(ctx, c.stream, c.name)
			if err != nil {
				return fmt.Errorf("consumer %s on %s: %w", c.name, c.stream, err)
			}
			info, err := cons.Info(ctx)
			if err != nil {
				return fmt.Errorf("consumer %s on %s: %w", c.name, c.stream, err)
			}
			busy += int(info.NumPending) + info.NumAckPending
		}
		if busy == 0 {
			streak++
		} else {
			streak = 0
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("ax not quiet after %s: %d messages or unpublished events in flight", r.cfg.StallTimeout, busy)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	return nil
}

// rateUntil is n per second from t0 to endNs; NaN when nothing ended.
func rateUntil(n int, t0 time.Time, endNs int64) float64 {
	if endNs == 0 {
		return math.NaN()
	}
	return rate(n, time.Duration(endNs-t0.UnixNano()))
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// join concatenates metric lists.
func join(lists ...[]Metric) []Metric {
	var out []Metric
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
