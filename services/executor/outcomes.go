package executor

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/dispatch"
	"github.com/axsched/ax/services/internal/lease"
	"github.com/axsched/ax/services/internal/store"
)

// maxOutcomeBatch bounds how many outcomes one transaction records.
const maxOutcomeBatch = 256

// outcome is one finished run waiting for its transfer to be recorded.
type outcome struct {
	r     *run
	steps []store.TransferParams
	done  chan error
	// keep marks a fused run's claim written on its own (claimLate): the
	// run goes on, so its lease is not released after the commit.
	keep bool
}

// recordOutcome hands the outcome of r to the writer and waits for it to
// be committed (or refused); the writer then releases r's lease.
func (e *Executor) recordOutcome(r *run, steps []store.TransferParams) error {
	o := outcome{r: r, steps: steps, done: make(chan error, 1)}
	e.outcomes <- o
	return <-o.done
}

// recordOutcomes records outcomes until the channel closes, in batches:
// whatever queued while a transaction was committing goes into the next
// one, so under load a commit carries hundreds of outcomes and when idle
// an outcome waits for nothing. Up to Config.OutcomeWriters transactions
// commit side by side, but one starts beside a running one only once
// Config.OutcomeOverflow outcomes wait: a second transaction of a few
// outcomes would only halve the batches, paying a commit and each
// statement's round trip twice for the same work (measured: +3–5 % CPU a
// task at moderate load), while a backlog that big drains faster on two
// (the outcome writer is what paces a drain). With one transaction at a
// time, a final transfer that releases children and moves a workflow
// holds the outcomes behind it until it commits; with more, transactions
// lock disjoint runs' rows, where they meet (a child or a workflow two
// parents share) InnoDB serialises them, and a deadlock is retried
// (TransferBatch). Leases are released after each commit, in one
// pipeline.
func (e *Executor) recordOutcomes(in <-chan outcome) {
	batches := make(chan []outcome)
	done := make(chan struct{})
	var writers sync.WaitGroup
	for range e.cfg.OutcomeWriters {
		writers.Go(func() {
			for b := range batches {
				e.writeBatch(b)
				done <- struct{}{}
			}
		})
	}
	defer func() {
		close(batches)
		writers.Wait()
	}()
	var batch []outcome
	busy := 0
	for in != nil || len(batch) > 0 || busy > 0 {
		if len(batch) > 0 && (busy == 0 || (busy < e.cfg.OutcomeWriters && len(batch) >= e.cfg.OutcomeOverflow)) {
			batches <- batch
			batch, busy = nil, busy+1
			continue
		}
		take := in
		if len(batch) >= maxOutcomeBatch {
			take = nil // full: wait for a writer
		}
		select {
		case o, ok := <-take:
			if !ok {
				in = nil
				continue
			}
			batch = append(batch, o)
		more:
			for len(batch) < maxOutcomeBatch {
				select {
				case o, ok := <-in:
					if !ok {
						in = nil
						break more
					}
					batch = append(batch, o)
				default:
					break more
				}
			}
		case <-done:
			busy--
		}
	}
}

// outcomeTimeout bounds one try of an outcome transaction.
const outcomeTimeout = 10 * time.Second

func (e *Executor) writeBatch(batch []outcome) {
	if e.beforeRecord != nil {
		e.beforeRecord()
	}
	chains := make([][]store.TransferParams, len(batch))
	runs := make([]*run, 0, len(batch))
	for i, o := range batch {
		chains[i] = o.steps
		if !o.keep {
			runs = append(runs, o.r)
		}
	}
	out, released, err := e.transferOutcomes(chains)
	ctx, cancel := context.WithTimeout(context.Background(), outcomeTimeout)
	defer cancel()
	if e.direct != nil {
		// A retry released here is the same task as one of the runs: its
		// claim takes the lease this attempt still holds, so that lease
		// goes first. The others are released after the sends, which
		// children's release latency does not wait for.
		runs = e.releaseRetried(runs, released)
		e.sendReleased(ctx, released, time.Now().UnixNano())
	}
	if err != nil {
		// One chain's extra write may have sunk the batch: record each on
		// its own so the others are not held hostage.
		e.logger.Warn("outcome batch failed; recording one by one", "outcomes", len(batch), "err", err)
		for _, o := range batch {
			_, err := e.store.TransferChain(ctx, o.steps...)
			o.done <- err
		}
	} else {
		for i, o := range batch {
			o.done <- out[i].Err
		}
	}
	e.releaseLocks(runs)
}

// transferOutcomes records chains in one transaction, trying again while
// MySQL does not answer (frozen, restarting, failing over) for as long as
// the executor runs: the watchdog renews the settling runs' leases
// meanwhile, so the reaper leaves their tasks alone and an outage of any
// length runs no finished task a second time. It stops trying when a
// shutdown's drain runs out of time (the runs' base context ends). A
// statement MySQL refused is not tried again here.
func (e *Executor) transferOutcomes(chains [][]store.TransferParams) ([]store.ChainResult, []store.Released, error) {
	wait := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), outcomeTimeout)
		var (
			out      []store.ChainResult
			released []store.Released
			err      error
		)
		if e.direct != nil {
			out, released, err = e.store.TransferBatchDispatching(ctx, chains)
		} else {
			out, err = e.store.TransferBatch(ctx, chains)
		}
		cancel()
		if err == nil || !store.IsUnreachable(err) || e.runBase.Err() != nil {
			return out, released, err
		}
		e.logger.Warn("recording outcomes: MySQL does not answer; trying again", "outcomes", len(chains), "retry_in", wait, "err", err)
		select {
		case <-time.After(wait):
		case <-e.runBase.Done():
		}
		wait = min(2*wait, 2*time.Second)
	}
}

// releaseRetried releases the leases of the runs whose task the same
// transaction made READY again (a retry whose backoff was over) and
// returns the other runs, filtered in place (runs is the writer's own).
func (e *Executor) releaseRetried(runs []*run, released []store.Released) []*run {
	if len(released) == 0 || len(runs) == 0 {
		return runs
	}
	ids := make(map[int64]struct{}, len(released))
	for _, r := range released {
		ids[r.Ref.TaskID] = struct{}{}
	}
	var retried []*run
	rest := runs[:0]
	for _, r := range runs {
		if _, ok := ids[r.task.ID]; ok {
			retried = append(retried, r)
		} else {
			rest = append(rest, r)
		}
	}
	e.releaseLocks(retried) // nothing to do when none was retried
	return rest
}

// releaseLocks deletes the leases of runs that still hold this attempt's
// value, in one round trip; a lease it cannot release expires by itself.
func (e *Executor) releaseLocks(runs []*run) {
	if len(runs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := e.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
		for _, r := range runs {
			lease.Release.Eval(ctx, pipe, []string{r.lockKey}, r.lockVal)
		}
		return nil
	})
	if err != nil && err != redis.Nil {
		e.logger.Warn("release leases failed; they expire by themselves", "leases", len(runs), "err", err)
	}
}

// DispatchWith makes the executor dispatch, right after their commit and
// with send's rule on conn, the tasks its outcome transactions release:
// the children a final transfer makes READY and due at once, the
// compensations a failed step starts, the retries whose backoff was over
// by the commit. Through the relay such a release waited for every other
// open transaction with a lower history ID, up to the gap grace; the
// executor knows its own commit (store.TransferBatchDispatching). Without
// it the relay dispatches them from their READY events. Call it before
// Run.
func (e *Executor) DispatchWith(send *dispatch.Sender, conn *bus.Conn) {
	e.direct = dispatch.NewQueue(send, conn, e.logger)
}
