package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/lease"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/retry"
	"github.com/axsched/ax/services/internal/store"
)

// run is one attempt of one task on this executor.
type run struct {
	task       Task
	retryCount int
	maxRetries int
	lockTTL    time.Duration
	lockKey    string
	lockVal    string
	limitKey   string // running-set key when the type has a cluster limit
	claimID    string // makes this claim's running-set member unique
	pool       *pool
	deadline   time.Duration
	cancel     context.CancelCauseFunc
	leaseOut   atomic.Bool
	// ended is when the handler returned (ax_task_hop_seconds).
	ended time.Time
	// report holds the handler's result and paces its progress writes.
	report *report
	// ran is how long the handler took.
	ran time.Duration
	// trace is the trace context the run joins: the dispatch's header,
	// or the one stored with the task (tracing).
	trace string
	// tookOver is the lease this claim took over from a claimant that
	// never committed (contest), named in the claim's history reason.
	tookOver string
	// fused is the state of a run started before its claim was written
	// (nil for a run claimed first): see fused.go.
	fused *fusedClaim
}

// take claims the task of h and starts it; it releases the slot it was
// given unless the task started, and settles the message, except when
// the type is at its cluster-wide limit (full): then the caller keeps
// both, so the task keeps its place.
func (e *Executor) take(ctx context.Context, p *pool, h *head) (full bool) {
	r, err := e.claim(ctx, p, h)
	switch {
	case errors.Is(err, errPoolFull):
		return true
	case err != nil:
		<-p.slots
		e.retryLater(ctx, h, err)
		return false
	case r == nil:
		<-p.slots
		_ = h.msg.Ack()
		return false
	}
	// The claim is committed: MySQL owns the task now, and a lost ack only
	// causes a redelivery whose claim conflicts.
	_ = h.msg.Ack()
	e.wg.Add(1)
	e.runners.Go(func() { e.execute(p, r) })
	return false
}

// retryLater hands back a message whose claim failed for a reason other
// than losing it: at once when shutting down (another executor may take
// it), otherwise after a second.
func (e *Executor) retryLater(ctx context.Context, h *head, err error) {
	if ctx.Err() != nil {
		_ = h.msg.Nak()
		return
	}
	if errors.Is(err, errLeaseHeld) {
		e.logger.Debug("lease held by a claim in flight; message redelivered shortly", "task_id", h.task.TaskID)
	} else {
		e.logger.Warn("claim failed; message redelivered shortly", "task_id", h.task.TaskID, "err", err)
	}
	_ = h.msg.NakWithDelay(time.Second)
}

// newRun prepares the run a claim of h would start; typeTimeout is the
// task type's current timeout (the settings cache).
func (e *Executor) newRun(p *pool, h *head, typeTimeout time.Duration) *run {
	d := &h.task
	next := d.Attempt + 1
	r := &run{
		// The payload and retry counts come with the claim (claimed).
		task:    Task{ID: d.TaskID, Type: d.Type, Attempt: next},
		lockKey: e.keys.Lock(d.TaskID),
		lockVal: lease.Value(e.cfg.Node, next),
		pool:    p,
	}
	if h.msg != nil {
		if hd := h.msg.Headers(); hd != nil {
			r.trace = hd.Get(events.HeaderTraceParent)
		}
	}
	timeout := time.Duration(d.TimeoutMs) * time.Millisecond
	if d.Load {
		// A lean dispatch does not say the task's timeout. The lease starts
		// at the type's, which a task has unless it was submitted with its
		// own (or the type's changed since), so nearly every claim takes
		// the right lease at once; the others are resized right after the
		// claim (claimed, resizeLeases) instead of costing every claim a
		// second Redis round trip before its handler starts.
		timeout = typeTimeout
	}
	r.setDeadline(timeout, e.cfg.LockTTL)
	return r
}

// setDeadline sets how long the attempt may run (the pool's timeout when
// the task names none) and the lease that covers it.
func (r *run) setDeadline(timeout, minTTL time.Duration) {
	r.deadline = timeout
	if r.deadline <= 0 {
		r.deadline = r.pool.spec.Timeout
	}
	// The lease is never shorter than the run may take, so even a renewal
	// lost to a Redis hiccup cannot hand a healthy run to someone else.
	r.lockTTL = max(minTTL, r.deadline+AbandonGrace)
}

// claimed takes what the attempt runs with from the row its claim locked:
// no dispatch carries the payload or retry counts, and a lean one
// (TaskDispatched.Load) not the timeout either. It reports whether the
// lease taken before the claim, sized by the message (a lean one: by the
// type's timeout), must be resized to the task's own.
func (e *Executor) claimed(r *run, f *store.RunFields) (resize bool) {
	if f == nil {
		return false
	}
	r.task.Payload = f.Payload
	r.retryCount, r.maxRetries = f.RetryCount, f.MaxRetries
	if r.trace == "" {
		// A dispatch without the header (from a sender that predates it):
		// the row knows the trace.
		r.trace = f.TraceParent
	}
	before := r.lockTTL
	r.setDeadline(time.Duration(f.TimeoutMs)*time.Millisecond, e.cfg.LockTTL)
	return r.lockTTL != before
}

// resizeLeases sets the leases of runs to their own length at once (one
// pipeline). Only lean dispatches of tasks whose own timeout gives another
// lease than their type's need it. A failure is logged: the
// watchdog's next renewal, every RenewInterval (well within LockTTL), sets
// the same length.
func (e *Executor) resizeLeases(ctx context.Context, runs []*run) {
	if len(runs) == 0 {
		return
	}
	pipe := e.rdb.Pipeline()
	for _, r := range runs {
		lease.Renew.Eval(ctx, pipe, []string{r.lockKey}, r.lockVal, r.lockTTL.Milliseconds())
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		e.logger.Warn("resize leases; the next renewal does it", "tasks", len(runs), "err", err)
	}
}

// claimParams is the fenced READY -> RUNNING transfer of a claim: it holds
// only while the task is READY at the dispatched attempt and due no later
// than the dispatch says (a dispatch built from an event or index entry
// must not start a task re-scheduled since; its newer dispatch will).
func (e *Executor) claimParams(d *events.TaskDispatched, r *run) store.TransferParams {
	attempt := d.Attempt
	reason := "claimed by " + e.cfg.Node
	switch {
	case d.FallbackFrom != "":
		reason += " (version " + e.version() + "; fell back from " + d.FallbackFrom + ", which had no live executor past the grace)"
	case e.cfg.VersionLabel != "":
		reason += " (version " + e.version() + ")"
	}
	if r.tookOver != "" {
		// The recovery of a claimant that died holding the lease (before
		// its claim, or inside its fused-claim window) is on record.
		reason += "; took over lease " + r.tookOver + " of a claim that never committed"
	}
	p := store.TransferParams{
		TaskID: d.TaskID, From: contracts.StatusReady, To: contracts.StatusRunning,
		Reason: reason, Attempt: &attempt, Claim: true, Executor: e.cfg.Node, ExecVersion: e.version(),
	}
	if d.NextRunTimeMs > 0 {
		due := d.NextRunTimeMs
		p.DueByMs = &due
	}
	return p
}

// takeBatch claims the tasks of hs together — their leases in one Redis
// pipeline, their READY -> RUNNING transfers in one transaction, or with a
// fused-claim window one read of their rows (readClaims) — and starts the
// winners. Every slot the fetcher took for hs is either handed
// to a run or released, and every message is settled. A type with a
// cluster-wide limit claims one task at a time, each waiting for a member
// of the running set.
func (e *Executor) takeBatch(ctx context.Context, p *pool, hs []*head) {
	settings := e.settings(ctx, p)
	if settings.Concurrency > 0 {
		// The limit was set after this batch was fetched (the limited
		// fetcher claims such types one by one): claim one at a time, and
		// hand back what finds the type full.
		for _, h := range hs {
			if e.take(ctx, p, h) {
				<-p.slots
				_ = h.msg.NakWithDelay(limitHandBack)
			}
		}
		return
	}
	typeTimeout := time.Duration(settings.TimeoutMs) * time.Millisecond
	runs := make([]*run, len(hs))
	pipe := e.rdb.Pipeline()
	locks := make([]*redis.BoolCmd, len(hs))
	for i, h := range hs {
		runs[i] = e.newRun(p, h, typeTimeout)
		locks[i] = pipe.SetNX(ctx, runs[i].lockKey, runs[i].lockVal, runs[i].lockTTL)
	}
	_, lockErr := pipe.Exec(ctx)
	var held []int                  // indexes into hs of the leases taken
	later := make([]error, len(hs)) // why a message goes back rather than being claimed or dropped
	for i, h := range hs {
		switch {
		case locks[i].Err() != nil:
			later[i] = locks[i].Err()
			continue
		case !locks[i].Val():
			// Held: rare, and MySQL must say by whom (contest).
			var taken bool
			if taken, later[i] = e.contest(ctx, &h.task, runs[i]); !taken {
				continue
			}
		}
		held = append(held, i)
	}
	giveBack := func(err error) {
		e.releaseLocks(subset(runs, held))
		for _, h := range hs {
			<-p.slots
			e.retryLater(ctx, h, err)
		}
	}
	if lockErr != nil && len(held) == 0 {
		giveBack(fmt.Errorf("lock tasks: %w", lockErr))
		return
	}
	if err := e.fault(ctx, subset(runs, held)); err != nil {
		giveBack(err)
		return
	}
	claim := e.writeClaims
	if e.cfg.ClaimAfter > 0 {
		claim = e.readClaims
	}
	won, err := claim(ctx, hs, runs, held)
	if err != nil {
		giveBack(err)
		return
	}
	e.startWon(ctx, p, hs, runs, won, later)
}

// writeClaims commits the READY -> RUNNING transfers of the leased runs
// (hs[held]) in one transaction and reports which won; the leases of the
// others are released. An error means nothing was written.
func (e *Executor) writeClaims(ctx context.Context, hs []*head, runs []*run, held []int) ([]bool, error) {
	won := make([]bool, len(hs))
	if len(held) == 0 {
		return won, nil
	}
	chains := make([][]store.TransferParams, len(held))
	for k, i := range held {
		chains[k] = []store.TransferParams{e.claimParams(&hs[i].task, runs[i])}
	}
	out, err := e.store.TransferBatch(ctx, chains)
	if err != nil {
		return nil, err
	}
	var lost, resize []*run
	claimedAt := time.Now()
	for k, i := range held {
		switch err := out[k].Err; {
		case err == nil:
			won[i] = true
			runs[i].task.Hops = hopsOf(hs[i], claimedAt)
			if e.claimed(runs[i], out[k].Results[0].Run) {
				resize = append(resize, runs[i])
			}
		case errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound):
			lost = append(lost, runs[i])
		default:
			lost = append(lost, runs[i])
			e.logger.Error("claim refused", "task_id", runs[i].task.ID, "err", err)
		}
	}
	e.releaseLocks(lost)
	e.resizeLeases(ctx, resize)
	return won, nil
}

// startWon starts the runs that won their claims and settles every other
// message of hs, releasing its slot: one whose lease Redis did not give
// (later) comes back, a lost claim is acknowledged and dropped. A claimed
// run's message is acknowledged now; a fused one's when its claim commits.
func (e *Executor) startWon(ctx context.Context, p *pool, hs []*head, runs []*run, won []bool, later []error) {
	for i, h := range hs {
		if !won[i] {
			<-p.slots
			if err := later[i]; err != nil {
				// Redis did not answer for this one, or a live claim holds
				// it: let it come back.
				e.retryLater(ctx, h, err)
				continue
			}
			metrics.ExecutorClaimsLost.WithLabelValues(h.task.Type).Inc()
			_ = h.msg.Ack()
			continue
		}
		if runs[i].fused == nil {
			// The claim is committed: MySQL owns the task now, and a lost
			// ack only causes a redelivery whose claim conflicts.
			_ = h.msg.Ack()
		}
		e.wg.Add(1)
		r := runs[i]
		e.runners.Go(func() { e.execute(p, r) })
	}
}

// fault runs the test hook afterLease, if any, for the leased runs.
func (e *Executor) fault(ctx context.Context, runs []*run) error {
	if e.afterLease == nil || len(runs) == 0 {
		return nil
	}
	ids := make([]int64, len(runs))
	for i, r := range runs {
		ids[i] = r.task.ID
	}
	return e.afterLease(ctx, ids)
}

func subset(runs []*run, idx []int) []*run {
	out := make([]*run, len(idx))
	for k, i := range idx {
		out[k] = runs[i]
	}
	return out
}

// claim takes the cluster slot (if limited), the lease and the RUNNING
// transfer; a nil run means another claimant won and the message is done,
// errPoolFull that the type is at its limit and nothing was taken.
func (e *Executor) claim(ctx context.Context, p *pool, h *head) (*run, error) {
	d := &h.task
	settings := e.settings(ctx, p)
	r := e.newRun(p, h, time.Duration(settings.TimeoutMs)*time.Millisecond)
	if settings.Concurrency > 0 {
		r.limitKey = e.keys.RunningSet(p.spec.Name)
		r.claimID = strconv.FormatUint(rand.Uint64(), 36)
		ok, err := e.acquireLimit(ctx, r, settings.Concurrency)
		if err != nil {
			return nil, err
		}
		if !ok {
			metrics.ExecutorRejections.WithLabelValues(d.Type).Inc()
			return nil, errPoolFull
		}
	}
	ok, err := e.rdb.SetNX(ctx, r.lockKey, r.lockVal, r.lockTTL).Result()
	if err != nil {
		e.releaseLimit(r)
		return nil, fmt.Errorf("lock task %d: %w", d.TaskID, err)
	}
	if !ok {
		if ok, err = e.contest(ctx, d, r); !ok {
			e.releaseLimit(r)
			if err != nil {
				return nil, err
			}
			metrics.ExecutorClaimsLost.WithLabelValues(d.Type).Inc()
			return nil, nil
		}
	}
	if err := e.fault(ctx, []*run{r}); err != nil {
		e.releaseLocks([]*run{r})
		e.releaseLimit(r)
		return nil, err
	}
	res, err := e.store.Transfer(ctx, e.claimParams(d, r))
	if err != nil {
		e.releaseLocks([]*run{r})
		e.releaseLimit(r)
		if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
			metrics.ExecutorClaimsLost.WithLabelValues(d.Type).Inc()
			return nil, nil
		}
		return nil, err
	}
	r.task.Hops = hopsOf(h, time.Now())
	if e.claimed(r, res.Run) {
		e.resizeLeases(ctx, []*run{r})
	}
	return r, nil
}

// errPoolFull is a claim that found the type's cluster-wide running set
// full.
var errPoolFull = errors.New("concurrency pool full")

// acquireLimit tries once to take a member of the type's cluster-wide
// running set, after rebuilding the set from MySQL if Redis lost it. It
// does not wait: the limited fetcher waits for room before it picks a task
// (waitRoom), so that what starts next is the best task waiting then.
func (e *Executor) acquireLimit(ctx context.Context, r *run, limit int) (bool, error) {
	for range 2 {
		ok, err := acquireLimitScript.Run(ctx, e.rdb, []string{r.limitKey, e.keys.RunningSetBuilt(r.task.Type)},
			r.limitMember(), limit, r.lockTTL.Milliseconds()).Int()
		switch {
		case err != nil:
			return false, fmt.Errorf("concurrency slot for %s: %w", r.task.Type, err)
		case ok == -1:
			// Redis lost the set: rebuild it from MySQL's RUNNING rows,
			// then try again.
			if err := e.rebuildLimit(ctx, r); err != nil {
				return false, err
			}
			continue
		}
		return ok == 1, nil
	}
	return false, nil
}

// limitMember names this claim in the type's running set. It is unique per
// claim, so a duplicate delivery of the same task (even to the same node),
// which loses the lease and releases its member, never frees the winner's
// slot.
func (r *run) limitMember() string {
	return limitMember(r.task.ID, r.lockVal, r.claimID)
}

// limitPlaceholder is the member a rebuild of the running set adds for
// this claim (rebuildLimit).
func (r *run) limitPlaceholder() string {
	return limitMember(r.task.ID, r.lockVal, rebuiltClaim)
}

// execute runs the handler and records its outcome.
func (e *Executor) execute(p *pool, r *run) {
	defer e.wg.Done()
	// The slot bounds handlers running at once. It is freed as soon as the
	// handler returns, not when its outcome is committed: recording is
	// ax's work, and holding slots through the outcome writer's commit
	// left the pool idle for a commit per task (under load the cap on a
	// pool's rate was slots / (claim + run + outcome commit)).
	freed := false
	free := func() {
		if !freed {
			freed = true
			<-p.slots
		}
	}
	defer free()
	r.report = &report{st: e.store, taskID: r.task.ID, attempt: r.task.Attempt, now: e.clock.Now}
	ctx, cancel := context.WithCancelCause(withReport(withStore(e.runBase, e.store), r.report))
	defer cancel(nil)
	r.cancel = cancel
	e.track(r, true)
	metrics.ExecutorActive.WithLabelValues(r.task.Type).Inc()
	defer metrics.ExecutorActive.WithLabelValues(r.task.Type).Dec()

	tctx, tcancel := context.WithTimeoutCause(ctx, r.deadline, errTimeout)
	defer tcancel()
	tctx, endSpan := e.runSpan(tctx, r)
	start := time.Now()
	r.task.Hops.observe(start)
	endWindow := e.openWindow(r)
	err := e.callHandler(tctx, p.spec.Handler, r)
	endWindow()
	r.ended = time.Now()
	r.ran = r.ended.Sub(start)
	metrics.ExecutorRunSeconds.WithLabelValues(r.task.Type).Observe(r.ran.Seconds())
	endSpan(err)
	// From here the watchdog only keeps the lease alive while the outcome
	// waits to be recorded: the release that follows the outcome is no
	// lost lease, and MySQL's verdict is the outcome's own.
	e.settle(r, true)
	e.track(r, false)
	p.recording <- struct{}{} // may wait, holding the slot (pool.recording)
	free()
	e.finish(r, err, context.Cause(tctx))
	<-p.recording
	e.settle(r, false)
}

// callHandler runs the handler on a runner goroutine of its own so a
// handler that ignores its context can be abandoned at the deadline: the
// slot is reclaimed, though the goroutine itself runs on until it returns
// (Go cannot kill a goroutine), and only then takes other work.
func (e *Executor) callHandler(ctx context.Context, h Handler, r *run) error {
	done := make(chan error, 1)
	e.runners.Go(func() {
		defer func() {
			if v := recover(); v != nil {
				done <- fmt.Errorf("handler panic: %v\n%s", v, store.Truncate(string(debug.Stack()), 1500))
			}
		}()
		t := r.task
		done <- h.Handle(ctx, &t)
	})
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
	defer e.releaseLimit(r)
	fused, ok := e.closeWindow(r)
	if !ok {
		return // its claim was refused or failed: claimLate settled it
	}
	// Built only when something is logged: finish runs once per task.
	log := func() *slog.Logger {
		return e.logger.With("task_id", r.task.ID, "type", r.task.Type, "attempt", r.task.Attempt)
	}
	switch {
	case fused && herr != nil && errors.Is(cause, errShutdown):
		// Nothing of the run is written yet: it is handed back as if it
		// never started.
		metrics.ExecutorRuns.WithLabelValues(r.task.Type, "returned").Inc()
		e.handBackFused(r)
		return
	case r.leaseOut.Load() || errors.Is(cause, errLeaseLost):
		// Still try the fenced write: if nobody took the task over it is
		// recorded; if somebody did, it is refused and the refusal is in the
		// task's history.
		log().Warn("lease lost while running", "err", herr)
	case errors.Is(cause, errCancelled) && !fused:
		// The task is already CANCELLED in MySQL; there is nothing to write.
		metrics.ExecutorRuns.WithLabelValues(r.task.Type, "cancelled").Inc()
		log().Info("handler cancelled")
		e.releaseLocks([]*run{r})
		return
	}
	steps, outcome := e.outcomeSteps(r, herr, cause)
	if errors.Is(cause, errCancelled) {
		// A fused run cancelled before its claim was written: the chain
		// is still written, so that its refused claim is on record.
		outcome = "cancelled"
	}
	metrics.ExecutorRuns.WithLabelValues(r.task.Type, outcome).Inc()
	e.sample(r, outcome, steps)
	if fused {
		steps = e.fuse(r, steps)
	}
	err := e.recordOutcome(r, steps)
	if fused {
		e.fusedVerdict(r, err)
	}
	if err == nil {
		observeHop(metrics.HopOutcome, r.ended, time.Now())
		return
	}
	if errors.Is(err, store.ErrConflict) {
		log().Warn("outcome rejected: attempt is no longer current", "outcome", outcome, "err", err)
		return
	}
	log().Error("record outcome failed; the reaper will recover the task", "outcome", outcome, "err", err)
}

// outcomeSteps are the transfers that record how r's handler ended (herr,
// and the cause of its context's end), and the outcome's metric label.
func (e *Executor) outcomeSteps(r *run, herr, cause error) ([]store.TransferParams, string) {
	attempt := r.task.Attempt
	switch {
	case herr == nil:
		// Checked before shutdown: a handler that finished as the drain
		// timed out did its work, and handing it back would run it again.
		steps := []store.TransferParams{{TaskID: r.task.ID, From: contracts.StatusRunning, To: contracts.StatusSuccess,
			Attempt: &attempt, RecordRejection: true, Reason: "handler succeeded on " + e.cfg.Node}}
		if res := r.report.resultOf(); res != nil {
			steps[0].Also = store.SetResult(r.task.ID, res)
		}
		return steps, "success"
	case errors.Is(cause, errShutdown):
		return []store.TransferParams{{TaskID: r.task.ID, From: contracts.StatusRunning, To: contracts.StatusReady,
			Attempt: &attempt, ClearExecutor: true, RecordRejection: true, Route: events.RouteDispatch,
			Reason: e.cfg.Node + " shut down before the task finished"}}, "returned"
	}
	f := retry.Failure{TaskID: r.task.ID, Type: r.task.Type, Attempt: attempt, RetryCount: r.retryCount,
		MaxRetries: r.maxRetries, Status: contracts.StatusFailed, Error: herr.Error(),
		Permanent: IsPermanent(herr), Reason: "handler failed on " + e.cfg.Node + ": " + herr.Error()}
	outcome := "failed"
	if errors.Is(cause, errTimeout) {
		f.Status, f.Reason, outcome = contracts.StatusTimeout, "deadline of "+r.deadline.String()+" exceeded on "+e.cfg.Node, "timeout"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	policy := retry.PolicyOf(e.settings(ctx, r.pool))
	cancel()
	if policy.FailSilently {
		// Non-core work: visible in metrics, but outside the alert rule.
		outcome += "_silent"
	}
	return retry.Plan(f, policy, e.clock.Now().UnixMilli(), nil), outcome
}

// track adds r to, or removes it from, the running runs.
func (e *Executor) track(r *run, add bool) { e.mark(e.running, r, add) }

// settle adds r to, or removes it from, the runs whose outcomes wait.
func (e *Executor) settle(r *run, add bool) { e.mark(e.settling, r, add) }

// mark adds r to, or removes it from, set (e.running or e.settling).
func (e *Executor) mark(set map[int64]*run, r *run, add bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if add {
		set[r.task.ID] = r
	} else if set[r.task.ID] == r {
		delete(set, r.task.ID)
	}
}

// sample adds, while the task's type is in rollout, the run to the guard's
// samples, written with the outcome (steps[0]).
func (e *Executor) sample(r *run, outcome string, steps []store.TransferParams) {
	outcome = strings.TrimSuffix(outcome, "_silent")
	if outcome != "success" && outcome != "failed" && outcome != "timeout" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	settings := e.settings(ctx, r.pool)
	cancel()
	if settings.Canary == nil {
		return
	}
	rec := store.RecordSample(r.task.Type, store.RolloutSample{Version: e.version(), Outcome: outcome, Duration: r.ran})
	if also := steps[0].Also; also != nil {
		steps[0].Also = func(ctx context.Context, tx store.Execer) error {
			if err := also(ctx, tx); err != nil {
				return err
			}
			return rec(ctx, tx)
		}
		return
	}
	steps[0].Also = rec
}
