package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/lease"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
)

// watchdog renews the leases of running tasks and refreshes their heartbeat.
func (e *Executor) watchdog(ctx context.Context) {
	t := time.NewTicker(e.cfg.RenewInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		// One pass fits in a period, whatever hangs: a MySQL that stopped
		// answering fails this pass's heartbeat rather than holding up the
		// next pass's lease renewals in Redis.
		pctx, cancel := context.WithTimeout(ctx, e.cfg.RenewInterval)
		e.renew(pctx)
		cancel()
	}
}

// snapshot returns the running runs and the settling ones.
func (e *Executor) snapshot() (running, settling []*run) {
	e.mu.Lock()
	defer e.mu.Unlock()
	running = make([]*run, 0, len(e.running))
	for _, r := range e.running {
		running = append(running, r)
	}
	settling = make([]*run, 0, len(e.settling))
	for _, r := range e.settling {
		settling = append(settling, r)
	}
	return running, settling
}

// renew renews the leases (and running-set members) of the running tasks
// and refreshes their heartbeats in MySQL. Redis only suggests: a lease or
// member found gone (Redis restarted, flushed or failed over) does not
// cancel a handler. MySQL decides: a task it no longer has RUNNING at this
// attempt is cancelled; one it still has gets its lease and member back
// (retake), and only a lease meanwhile held by someone else cancels it.
//
// The leases of settling runs (handler returned, outcome not yet
// recorded) are only renewed: while MySQL does not answer their outcomes
// wait, and the leases keep the reaper off their tasks meanwhile.
func (e *Executor) renew(ctx context.Context) {
	runs, settling := e.snapshot()
	if len(runs)+len(settling) == 0 {
		return
	}
	gone := e.renewLeases(ctx, slices.Concat(runs, settling))[:len(runs)]
	runs, gone = e.splitUnclaimed(ctx, runs, gone)
	if len(runs) == 0 {
		return
	}
	refs := make([]store.AttemptRef, len(runs))
	for i, r := range runs {
		refs[i] = store.AttemptRef{ID: r.task.ID, Attempt: r.task.Attempt}
	}
	// The heartbeat goes to MySQL even when Redis did not answer: it is
	// what the reaper trusts before it takes a task away.
	stale, err := e.store.Heartbeat(ctx, refs)
	if err != nil {
		e.logger.Warn("heartbeat failed", "err", err)
		return
	}
	var retake []*run
	for i, r := range runs {
		switch {
		case stale[r.task.ID] && gone[i]:
			// Taken over (its lease lapsed, the task was handed on): the
			// outcome is still written, and its refusal by the attempt
			// fence is recorded in the task's history.
			e.loseLease(r, "lease lost and the task is no longer this attempt's; cancelling handler")
		case stale[r.task.ID]:
			// The attempt was cancelled while the cancellation event
			// missed us: stop its handler.
			e.logger.Info("task is no longer this attempt's; cancelling handler", "task_id", r.task.ID, "attempt", r.task.Attempt)
			r.cancel(errCancelled)
		case gone[i] && e.tracked(r):
			retake = append(retake, r)
		}
	}
	e.retake(ctx, retake)
}

// splitUnclaimed takes the fused runs whose claim is not written yet out
// of runs (and their gone flags): MySQL has their tasks READY, so they get
// no heartbeat, and a lease Redis lost is judged by checkUnclaimed.
func (e *Executor) splitUnclaimed(ctx context.Context, runs []*run, gone []bool) ([]*run, []bool) {
	var lostLease []*run
	n := 0
	for i, r := range runs {
		if r.unclaimed() {
			if gone[i] {
				lostLease = append(lostLease, r)
			}
			continue
		}
		runs[n], gone[n] = r, gone[i]
		n++
	}
	e.checkUnclaimed(ctx, lostLease)
	return runs[:n], gone[:n]
}

// renewLeases extends every run's lease and running-set member in one
// pipeline and reports, per run, whether its lease or member was gone.
// When Redis does not answer, nothing is reported gone: the leases are
// long enough to outlast a hiccup, and MySQL fences the outcome anyway.
func (e *Executor) renewLeases(ctx context.Context, runs []*run) []bool {
	pipe := e.rdb.Pipeline()
	leases := make([]*redis.Cmd, len(runs))
	members := make([]*redis.Cmd, len(runs))
	for i, r := range runs {
		leases[i] = lease.Renew.Eval(ctx, pipe, []string{r.lockKey}, r.lockVal, r.lockTTL.Milliseconds())
		if r.limitKey != "" {
			members[i] = renewLimitScript.Eval(ctx, pipe, []string{r.limitKey}, r.limitMember(),
				r.lockTTL.Milliseconds(), r.limitPlaceholder())
		}
	}
	gone := make([]bool, len(runs))
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		e.logger.Warn("lease renewal failed", "err", err)
		return gone
	}
	for i := range runs {
		n, _ := leases[i].Int()
		gone[i] = n == 0
		if members[i] != nil {
			if m, _ := members[i].Int(); m == 0 {
				gone[i] = true
			}
		}
	}
	return gone
}

// retake puts back the leases and running-set members Redis lost of runs
// MySQL just confirmed as still this attempt's. A lease another holds now
// is lost after all: its handler is cancelled.
func (e *Executor) retake(ctx context.Context, runs []*run) {
	if len(runs) == 0 {
		return
	}
	pipe := e.rdb.Pipeline()
	locks := make([]*redis.Cmd, len(runs))
	for i, r := range runs {
		// SET NX, or a renewal when the lease is still ours (only the
		// member was gone).
		locks[i] = lease.Retake.Eval(ctx, pipe, []string{r.lockKey}, r.lockVal, r.lockTTL.Milliseconds())
		if r.limitKey != "" {
			restoreLimitScript.Eval(ctx, pipe, []string{r.limitKey}, r.limitMember(), r.lockTTL.Milliseconds(), r.limitPlaceholder())
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		e.logger.Warn("take leases back failed; the next renewal tries again", "err", err)
		return
	}
	for i, r := range runs {
		if n, _ := locks[i].Int(); n == 0 {
			e.loseLease(r, "lease held by another; cancelling handler")
			continue
		}
		e.logger.Info("lease lost with Redis; MySQL says the task is still ours, taken back", "task_id", r.task.ID, "attempt", r.task.Attempt)
	}
}

// loseLease cancels r's handler for a lost lease; its outcome is still
// written, fenced by its attempt.
func (e *Executor) loseLease(r *run, msg string) {
	r.leaseOut.Store(true)
	metrics.LeasesLost.Inc()
	e.logger.Warn(msg, "task_id", r.task.ID, "attempt", r.task.Attempt)
	r.cancel(errLeaseLost)
}

// tracked reports whether r is still running here: a run that just ended
// must not have its released lease put back.
func (e *Executor) tracked(r *run) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running[r.task.ID] == r
}

// cancelledRun is the run here whose task the CANCELLED event ev ended: a
// claimed run's task cancelled while RUNNING at its attempt, or a fused
// run's, still unclaimed, cancelled while READY at the attempt before.
func (e *Executor) cancelledRun(ev events.TaskTransferred) *run {
	e.mu.Lock()
	r := e.running[ev.TaskID]
	e.mu.Unlock()
	switch {
	case r == nil:
		return nil
	case ev.From == contracts.StatusRunning && r.task.Attempt == ev.Attempt:
		return r
	case ev.From == contracts.StatusReady && r.unclaimed() && r.task.Attempt == ev.Attempt+1:
		return r
	}
	return nil
}

// watchCancellations listens (core NATS, no durable state) to CANCELLED
// events and cancels the handler of a cancelled task running here
// (cancelledRun). A missed event is caught by the next heartbeat, or, for
// a fused run not yet claimed, by its claim's refusal.
func (e *Executor) watchCancellations() (func(), error) {
	sub, err := e.conn.NC.Subscribe(events.TaskEventSubject(contracts.StatusCancelled), func(m *nats.Msg) {
		evs, err := events.ReadTransfers[events.TaskTransferred](m.Header.Get(events.HeaderEventType), m.Data, nil)
		if err != nil {
			return
		}
		for _, ev := range evs {
			if r := e.cancelledRun(ev); r != nil {
				e.logger.Info("task cancelled; cancelling handler", "task_id", ev.TaskID, "attempt", r.task.Attempt)
				r.cancel(errCancelled)
			}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to cancellations: %w", err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}
