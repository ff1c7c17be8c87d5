package executor

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
)

// Fused claims. With Config.ClaimAfter > 0, a batch of a type without a
// cluster-wide limit is not claimed by a transaction of its own: after the
// leases (SET NX, as always), one plain SELECT reads the rows and checks
// the claim's fence (READY at the dispatched attempt, due no later than
// the dispatch says), and the handlers start at once. A handler that
// returns within the window has its outcome written as the chain [READY ->
// RUNNING, outcome...] in one transaction of the outcome writer: two
// history rows, one commit. A handler still running when the window ends
// has its claim written alone (through the same writer, batched with
// whatever else is due) and from then on is an ordinary claimed run.
//
// Until its claim commits, a run's task is READY in MySQL and only its
// lease says it runs. Every claim keeps the fence, now checked under the
// row lock of the transaction that writes it: a task cancelled,
// re-scheduled or claimed by another (after a Redis loss) meanwhile
// refuses it, the refusal is recorded in the task's history
// (RecordRejection), the lease is released and no outcome is written; a
// refused claim at the end of the window cancels the still running handler
// (errClaimRefused). The dispatch is acknowledged only once the claim, or
// the fused chain, has its verdict: a node that dies inside the window
// leaves an unacknowledged dispatch and a lease on a READY task, exactly
// as one that dies between its lease and its claim, and the redelivery
// (bus.ExecAckWait) takes the dead node's lease over (contest).

// Phases of a fused claim.
const (
	// phasePending: the handler runs, nothing is written yet.
	phasePending int32 = iota
	// phaseClaiming: the window ended (or the handler reported progress)
	// first: the claim is written on its own.
	phaseClaiming
	// phaseFused: the handler returned first: the claim goes with the
	// outcome.
	phaseFused
)

// fusedClaim is the claim of a run started before it was written.
type fusedClaim struct {
	msg      jetstream.Msg
	dispatch events.TaskDispatched
	phase    atomic.Int32
	// claimed is set once the claim committed on its own: the run is a
	// claimed one from then on (heartbeats, lease checks against MySQL).
	claimed atomic.Bool
	// done is closed once the claim written on its own has its verdict,
	// err (nil: committed).
	done chan struct{}
	err  error
	// keptNs is when JetStream last heard of msg (its delivery, then each
	// InProgress): see keepFusedAlive.
	keptNs atomic.Int64
}

// keepFusedAlive tells JetStream that the dispatches of p's fused runs
// still waiting for their verdict are being worked on: such a dispatch is
// acknowledged only once its claim (alone, or with the outcome) commits,
// and an outcome writer held up past the ack wait (bus.ExecAckWait: MySQL
// slow, a deep backlog) would otherwise have it delivered again, to a
// contest that hands it back. Called from the intake's tend loop, every
// keepAliveAge/2; a message already acknowledged ignores it.
func (e *Executor) keepFusedAlive(p *pool, now time.Time) {
	running, settling := e.snapshot()
	for _, r := range append(running, settling...) {
		f := r.fused
		if r.pool != p || f == nil || f.claimed.Load() {
			continue
		}
		if now.UnixNano()-f.keptNs.Load() > keepAliveAge.Nanoseconds() {
			_ = f.msg.InProgress()
			f.keptNs.Store(now.UnixNano())
		}
	}
}

// unclaimed reports whether r's task is still READY for all MySQL knows:
// a fused run whose claim has not committed.
func (r *run) unclaimed() bool {
	return r.fused != nil && !r.fused.claimed.Load()
}

// readClaims decides the claims of the leased runs (hs[held]) with one
// plain read of their rows, checking the fence their transfer will check
// again, and reports which won; the leases of the others are released.
// For the hops, a won run is "claimed" when the read answered.
func (e *Executor) readClaims(ctx context.Context, hs []*head, runs []*run, held []int) ([]bool, error) {
	won := make([]bool, len(hs))
	if len(held) == 0 {
		return won, nil
	}
	// A child taken up where it was released brings what its release
	// read under its row lock, READY at this attempt and due: only the
	// others are read.
	ids := make([]int64, 0, len(held))
	for _, i := range held {
		if hs[i].run == nil {
			ids = append(ids, hs[i].task.TaskID)
		}
	}
	var rows map[int64]store.RunRow
	if len(ids) > 0 {
		if e.beforeRead != nil {
			e.beforeRead(ids)
		}
		var err error
		if rows, err = e.store.RunRows(ctx, ids); err != nil {
			return nil, err
		}
	}
	decided := time.Now()
	var lost, resize []*run
	for _, i := range held {
		d, r := &hs[i].task, runs[i]
		fields := hs[i].run
		if fields == nil {
			row, ok := rows[d.TaskID]
			if !ok || !row.Claimable(d.Attempt, d.NextRunTimeMs) {
				lost = append(lost, r)
				continue
			}
			fields = &row.Run
		}
		won[i] = true
		r.fused = &fusedClaim{msg: hs[i].msg, dispatch: *d, done: make(chan struct{})}
		r.fused.keptNs.Store(hs[i].fetchedAt.UnixNano())
		r.task.Hops = hopsOf(hs[i], decided)
		if e.claimed(r, fields) {
			resize = append(resize, r)
		}
	}
	e.releaseLocks(lost)
	e.resizeLeases(ctx, resize)
	return won, nil
}

// openWindow starts the window of a fused run, whose end writes the claim
// on its own, and returns the function that closes it when the handler
// returns. A progress report inside the window writes the claim first.
func (e *Executor) openWindow(r *run) func() {
	if r.fused == nil {
		return func() {}
	}
	r.report.claimFirst = func() error { return e.claimNow(r) }
	t := time.AfterFunc(e.cfg.ClaimAfter, func() { e.claimLate(r) })
	return func() { t.Stop() }
}

// closeWindow settles the claim of a run whose handler returned: fused
// when the claim goes with the outcome; ok false when the claim, written
// on its own, was refused or failed, and nothing more may be written.
func (e *Executor) closeWindow(r *run) (fused, ok bool) {
	f := r.fused
	if f == nil {
		return false, true
	}
	if f.phase.CompareAndSwap(phasePending, phaseFused) {
		return true, true
	}
	<-f.done
	return false, f.err == nil
}

// claimNow writes r's claim on its own if it is not written yet and waits
// for its verdict.
func (e *Executor) claimNow(r *run) error {
	f := r.fused
	e.claimLate(r)
	if f.phase.Load() != phaseClaiming {
		return nil // the handler returned meanwhile: the claim goes with it
	}
	<-f.done
	if f.err != nil {
		return fmt.Errorf("claim of task %d: %w", r.task.ID, f.err)
	}
	return nil
}

// claimLate writes the claim of a run still pending when its window ends,
// through the outcome writer (batched with what else is due). Committed,
// the run goes on as a claimed one and its dispatch is acknowledged;
// refused, the refusal is recorded, the handler cancelled, the lease
// released and the dispatch dropped; failed, the dispatch comes back.
func (e *Executor) claimLate(r *run) {
	f := r.fused
	if !f.phase.CompareAndSwap(phasePending, phaseClaiming) {
		return
	}
	defer close(f.done)
	claim := e.claimParams(&f.dispatch, r)
	claim.RecordRejection, claim.SkipRun = true, true
	o := outcome{r: r, steps: []store.TransferParams{claim}, keep: true, done: make(chan error, 1)}
	e.outcomes <- o
	f.err = <-o.done
	switch err := f.err; {
	case err == nil:
		f.claimed.Store(true)
		_ = f.msg.Ack()
	case errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound):
		metrics.ExecutorClaimsLost.WithLabelValues(r.task.Type).Inc()
		e.logger.Warn("claim refused when the fused-claim window ended; cancelling handler",
			"task_id", r.task.ID, "attempt", r.task.Attempt, "err", err)
		r.cancel(errClaimRefused)
		e.releaseLocks([]*run{r})
		_ = f.msg.Ack()
	default:
		e.logger.Error("claim failed when the fused-claim window ended; cancelling handler, the dispatch comes back",
			"task_id", r.task.ID, "attempt", r.task.Attempt, "err", err)
		r.cancel(fmt.Errorf("%w: %w", errClaimFailed, err))
		e.releaseLocks([]*run{r})
		_ = f.msg.NakWithDelay(time.Second)
	}
}

// fuse puts the claim of a fused run before its outcome's steps: the
// chain commits whole or not at all, and a refused claim is recorded.
func (e *Executor) fuse(r *run, steps []store.TransferParams) []store.TransferParams {
	claim := e.claimParams(&r.fused.dispatch, r)
	claim.RecordRejection, claim.SkipRun = true, true
	return append([]store.TransferParams{claim}, steps...)
}

// fusedVerdict settles the dispatch of a fused run once its chain has its
// verdict (err): acknowledged when it committed or was refused (recorded
// in history; the lease is released by the writer), handed back when it
// could not be written, so the task runs again.
func (e *Executor) fusedVerdict(r *run, err error) {
	msg := r.fused.msg
	switch {
	case err == nil:
		_ = msg.Ack()
	case errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound):
		metrics.ExecutorClaimsLost.WithLabelValues(r.task.Type).Inc()
		e.logger.Warn("fused claim refused: the task changed while its handler ran; refusal recorded, outcome dropped",
			"task_id", r.task.ID, "attempt", r.task.Attempt, "err", err)
		_ = msg.Ack()
	default:
		_ = msg.NakWithDelay(time.Second)
	}
}

// handBackFused gives back a fused run stopped by shutdown before its
// claim was written: nothing is written, the lease is released and the
// dispatch comes back at once for another executor.
func (e *Executor) handBackFused(r *run) {
	e.releaseLocks([]*run{r})
	_ = r.fused.msg.Nak()
}

// checkUnclaimed judges fused runs whose lease Redis lost before their
// claim was written: MySQL decides, as for claimed runs (renew), but for
// them "ours" means still READY at the attempt before the run's. Those are
// given their lease back; any other is being claimed or refused right now
// (claimLate), and the next pass sees the outcome.
func (e *Executor) checkUnclaimed(ctx context.Context, runs []*run) {
	if len(runs) == 0 {
		return
	}
	ids := make([]int64, len(runs))
	for i, r := range runs {
		ids[i] = r.task.ID
	}
	rows, err := e.store.RunRows(ctx, ids)
	if err != nil {
		e.logger.Warn("check unclaimed runs with lost leases", "err", err)
		return
	}
	var retake []*run
	for _, r := range runs {
		if row, ok := rows[r.task.ID]; ok && row.Claimable(r.task.Attempt-1, 0) && e.tracked(r) {
			retake = append(retake, r)
		}
	}
	e.retake(ctx, retake)
}
