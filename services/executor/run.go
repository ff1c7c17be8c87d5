package executor

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
)

// run is one attempt of one task on this executor.
type run struct {
	task     Task
	lockKey  string
	lockVal  string
	limitKey string // running-set key when the type has a cluster limit
	deadline time.Duration
	cancel   context.CancelCauseFunc
	leaseOut atomic.Bool
}

// take claims the task of h and starts it; it always releases the slot it
// was given unless the task started, and always settles the message.
func (e *Executor) take(ctx context.Context, p *pool, h *head) {
	r, err := e.claim(ctx, p, h)
	switch {
	case err != nil:
		<-p.slots
		e.logger.Warn("claim failed; message redelivered shortly", "task_id", h.task.TaskID, "err", err)
		_ = h.msg.NakWithDelay(time.Second)
		return
	case r == nil:
		<-p.slots
		_ = h.msg.Ack()
		return
	}
	// The claim is committed: MySQL owns the task now, and a lost ack only
	// causes a redelivery whose claim conflicts.
	_ = h.msg.Ack()
	e.wg.Add(1)
	go e.execute(p, r)
}

// claim takes the cluster slot (if limited), the lease and the RUNNING
// transfer; a nil run means another claimant won and the message is done.
func (e *Executor) claim(ctx context.Context, p *pool, h *head) (*run, error) {
	d := &h.task
	next := d.Attempt + 1
	r := &run{
		task:    Task{ID: d.TaskID, Type: d.Type, Attempt: next, Payload: d.Payload},
		lockKey: e.keys.Lock(d.TaskID),
		lockVal: e.cfg.Node + ":" + strconv.Itoa(next),
	}
	settings := e.settings(ctx, p)
	if settings.Concurrency > 0 {
		r.limitKey = e.keys.RunningSet(p.spec.Name)
		if err := e.acquireLimit(ctx, r, settings.Concurrency, h); err != nil {
			return nil, err
		}
	}
	ok, err := e.rdb.SetNX(ctx, r.lockKey, r.lockVal, e.cfg.LockTTL).Result()
	if err != nil {
		e.releaseLimit(r)
		return nil, fmt.Errorf("lock task %d: %w", d.TaskID, err)
	}
	if !ok {
		e.releaseLimit(r)
		metrics.ExecutorClaimsLost.WithLabelValues(d.Type).Inc()
		return nil, nil
	}
	attempt := d.Attempt
	_, err = e.store.Transfer(ctx, store.TransferParams{
		TaskID: d.TaskID, From: contracts.StatusReady, To: contracts.StatusRunning,
		Reason: "claimed by " + e.cfg.Node, Attempt: &attempt, Claim: true, Executor: e.cfg.Node,
	})
	if err != nil {
		e.releaseLock(r)
		e.releaseLimit(r)
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			metrics.ExecutorClaimsLost.WithLabelValues(d.Type).Inc()
			return nil, nil
		}
		return nil, err
	}
	r.deadline = time.Duration(d.TimeoutMs) * time.Millisecond
	if r.deadline <= 0 {
		r.deadline = p.spec.Timeout
	}
	return r, nil
}

// acquireLimit waits for a member of the type's cluster-wide running set,
// keeping the held message alive meanwhile.
func (e *Executor) acquireLimit(ctx context.Context, r *run, limit int, h *head) error {
	member := strconv.FormatInt(r.task.ID, 10)
	wait := 20 * time.Millisecond
	for {
		ok, err := acquireLimitScript.Run(ctx, e.rdb, []string{r.limitKey}, member, limit, e.cfg.LockTTL.Milliseconds()).Int()
		if err != nil {
			return fmt.Errorf("concurrency slot for %s: %w", r.task.Type, err)
		}
		if ok == 1 {
			return nil
		}
		if time.Since(h.lastKeep) > keepAliveAge {
			_ = h.msg.InProgress()
			h.lastKeep = time.Now()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
		wait = min(wait*2, 250*time.Millisecond)
	}
}

// execute runs the handler and records its outcome.
func (e *Executor) execute(p *pool, r *run) {
	defer e.wg.Done()
	defer func() { <-p.slots }()
	ctx, cancel := context.WithCancelCause(e.runBase)
	defer cancel(nil)
	r.cancel = cancel
	e.track(r, true)
	metrics.ExecutorActive.WithLabelValues(r.task.Type).Inc()
	defer metrics.ExecutorActive.WithLabelValues(r.task.Type).Dec()

	tctx, tcancel := context.WithTimeoutCause(ctx, r.deadline, errTimeout)
	defer tcancel()
	start := time.Now()
	err := e.callHandler(tctx, p.spec.Handler, r)
	metrics.ExecutorRunSeconds.WithLabelValues(r.task.Type).Observe(time.Since(start).Seconds())
	// Stop renewing before finish releases the lock, or the watchdog would
	// take the release for a lost lease.
	e.track(r, false)
	e.finish(r, err, context.Cause(tctx))
}

// callHandler runs the handler in its own goroutine so a handler that
// ignores its context can be abandoned at the deadline: the slot is
// reclaimed, though the goroutine itself runs on until it returns (Go cannot
// kill a goroutine).
func (e *Executor) callHandler(ctx context.Context, h Handler, r *run) error {
	done := make(chan error, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- fmt.Errorf("handler panic: %v\n%s", v, truncate(string(debug.Stack()), 1500))
			}
		}()
		t := r.task
		done <- h.Handle(ctx, &t)
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	select {
	case err := <-done:
		return err
	case <-time.After(AbandonGrace):
		e.logger.Warn("handler ignored its context; abandoned", "task_id", r.task.ID, "type", r.task.Type)
		return fmt.Errorf("handler abandoned after ignoring its context: %w", context.Cause(ctx))
	}
}

func (e *Executor) finish(r *run, herr, cause error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	defer e.releaseLimit(r)
	defer e.releaseLock(r)
	log := e.logger.With("task_id", r.task.ID, "type", r.task.Type, "attempt", r.task.Attempt)
	switch {
	case r.leaseOut.Load() || errors.Is(cause, errLeaseLost):
		metrics.ExecutorRuns.WithLabelValues(r.task.Type, "lease_lost").Inc()
		log.Warn("lease lost while running; outcome not recorded", "err", herr)
		return
	case errors.Is(cause, errCancelled):
		// The task is already CANCELLED in MySQL; there is nothing to write.
		metrics.ExecutorRuns.WithLabelValues(r.task.Type, "cancelled").Inc()
		log.Info("handler cancelled")
		return
	}
	attempt := r.task.Attempt
	p := store.TransferParams{TaskID: r.task.ID, From: contracts.StatusRunning, Attempt: &attempt}
	outcome := ""
	switch {
	case errors.Is(cause, errShutdown):
		p.To, p.Reason, p.ClearExecutor = contracts.StatusReady, e.cfg.Node+" shut down before the task finished", true
		outcome = "returned"
	case herr == nil:
		p.To, p.Reason = contracts.StatusSuccess, "handler succeeded on "+e.cfg.Node
		outcome = "success"
	case errors.Is(cause, errTimeout):
		msg := herr.Error()
		p.To, p.Reason, p.LastError = contracts.StatusTimeout, "deadline exceeded on "+e.cfg.Node, &msg
		outcome = "timeout"
	default:
		msg := herr.Error()
		p.To, p.Reason, p.LastError = contracts.StatusFailed, "handler failed on "+e.cfg.Node+": "+msg, &msg
		outcome = "failed"
	}
	metrics.ExecutorRuns.WithLabelValues(r.task.Type, outcome).Inc()
	if _, err := e.store.Transfer(ctx, p); err != nil {
		if errors.Is(err, store.ErrConflict) {
			log.Warn("outcome rejected: attempt is no longer current", "to", p.To, "err", err)
			return
		}
		log.Error("record outcome failed; the reaper will recover the task", "to", p.To, "err", err)
	}
}

func (e *Executor) track(r *run, add bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if add {
		e.running[r.task.ID] = r
	} else if e.running[r.task.ID] == r {
		delete(e.running, r.task.ID)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
