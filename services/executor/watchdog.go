package executor

import (
	"context"
	"errors"
	"fmt"
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
		e.renew(ctx)
	}
}

func (e *Executor) snapshot() []*run {
	e.mu.Lock()
	defer e.mu.Unlock()
	runs := make([]*run, 0, len(e.running))
	for _, r := range e.running {
		runs = append(runs, r)
	}
	return runs
}

func (e *Executor) renew(ctx context.Context) {
	runs := e.snapshot()
	if len(runs) == 0 {
		return
	}
	pipe := e.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(runs))
	for i, r := range runs {
		cmds[i] = lease.Renew.Eval(ctx, pipe, []string{r.lockKey}, r.lockVal, r.lockTTL.Milliseconds())
		if r.limitKey != "" {
			renewLimitScript.Eval(ctx, pipe, []string{r.limitKey}, r.limitMember(), r.lockTTL.Milliseconds())
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		// Redis unreachable: keep running; if the lease really lapses the
		// fenced outcome write is rejected.
		e.logger.Warn("lease renewal failed", "err", err)
		return
	}
	refs := make([]store.AttemptRef, 0, len(runs))
	live := make([]*run, 0, len(runs))
	for i, r := range runs {
		if n, _ := cmds[i].Int(); n == 0 {
			r.leaseOut.Store(true)
			metrics.LeasesLost.Inc()
			e.logger.Warn("lease lost; cancelling handler", "task_id", r.task.ID, "attempt", r.task.Attempt)
			r.cancel(errLeaseLost)
			continue
		}
		refs = append(refs, store.AttemptRef{ID: r.task.ID, Attempt: r.task.Attempt})
		live = append(live, r)
	}
	stale, err := e.store.Heartbeat(ctx, refs)
	if err != nil {
		e.logger.Warn("heartbeat failed", "err", err)
		return
	}
	// An attempt the heartbeat no longer matches was cancelled (or taken
	// over) while the cancellation event missed us: stop its handler.
	for _, r := range live {
		if stale[r.task.ID] {
			e.logger.Info("task is no longer this attempt's; cancelling handler", "task_id", r.task.ID, "attempt", r.task.Attempt)
			r.cancel(errCancelled)
		}
	}
}

// watchCancellations listens (core NATS, no durable state) to CANCELLED
// events and cancels the handler of a cancelled RUNNING task held here. A
// missed event is caught by the next heartbeat.
func (e *Executor) watchCancellations() (func(), error) {
	sub, err := e.conn.NC.Subscribe(events.TaskEventSubject(contracts.StatusCancelled), func(m *nats.Msg) {
		var ev events.TaskTransferred
		if events.Decode(m.Data, &ev) != nil || ev.From != contracts.StatusRunning {
			return
		}
		e.mu.Lock()
		r := e.running[ev.TaskID]
		e.mu.Unlock()
		if r != nil && r.task.Attempt == ev.Attempt {
			e.logger.Info("task cancelled; cancelling handler", "task_id", ev.TaskID, "attempt", ev.Attempt)
			r.cancel(errCancelled)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("subscribe to cancellations: %w", err)
	}
	return func() { _ = sub.Unsubscribe() }, nil
}
