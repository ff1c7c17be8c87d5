package reaper

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/lease"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
)

// Defaults for RetentionConfig. The retentions are the flags' defaults; a
// zero RetentionConfig keeps everything.
const (
	RetainSuccessDefault   = 7 * 24 * time.Hour
	RetainCancelledDefault = 7 * 24 * time.Hour
	RetainFailedDefault    = 30 * 24 * time.Hour
	// RetentionMin is the shortest retention accepted: anything shorter
	// is a typo (a unit missing) rather than a wish.
	RetentionMin = time.Minute

	RetentionEveryDefault = time.Minute
	RetentionBatchDefault = 200
	// RetentionBatchMax bounds a batch: each task brings its history rows
	// and dead letter into the same transaction.
	RetentionBatchMax        = 5000
	RetentionPassDefault     = 100
	RetentionPauseDefault    = 50 * time.Millisecond
	RetentionLeaseTTLDefault = 30 * time.Second
)

// RetentionConfig says how long finished tasks are kept and how the reaper
// deletes older ones. A retention of zero keeps that state's tasks for
// ever.
type RetentionConfig struct {
	// Success, Cancelled and Failed are how long after its end a task is
	// kept in SUCCESS, in CANCELLED, and failed for good (FAILED or
	// TIMEOUT, a dead letter), with its history and dead letter.
	Success, Cancelled, Failed time.Duration
	// Every is the pause between passes when the last one found nothing
	// more due (1 min).
	Every time.Duration
	// Batch is the tasks deleted per transaction (200): few locks, held
	// briefly, so the hot path barely notices.
	Batch int
	// PassBatches bounds a pass (100 batches); a pass that reached it
	// yields the lease and the next one starts after Pause.
	PassBatches int
	// Pause is the least rest between two batches (50 ms). The rest is
	// also at least retentionRestFactor times as long as the last batch
	// took, so pruning takes at most a tenth of one connection's time
	// however loaded MySQL is, and leaves the rest to the work in
	// progress.
	Pause time.Duration
	// LeaseTTL is how long the Redis lease lasts unless renewed; it is
	// renewed after every batch (30 s).
	LeaseTTL time.Duration
	// Holder names this reaper in the lease; app sets it from --node.
	Holder string
}

// Validate refuses negative retentions and ones under RetentionMin.
func (c RetentionConfig) Validate() error {
	for _, s := range []struct {
		name string
		d    time.Duration
	}{{"success", c.Success}, {"cancelled", c.Cancelled}, {"failed", c.Failed}} {
		if s.d != 0 && s.d < RetentionMin {
			return fmt.Errorf("retention of %s tasks %s: give at least %s, or 0 to keep them forever", s.name, s.d, RetentionMin)
		}
	}
	if c.Batch < 0 || c.Batch > RetentionBatchMax {
		return fmt.Errorf("retention batch %d: give 1 to %d tasks per transaction (0 takes the default, %d)", c.Batch, RetentionBatchMax, RetentionBatchDefault)
	}
	return nil
}

// Enabled reports whether any state's tasks are ever deleted.
func (c RetentionConfig) Enabled() bool { return c.Success > 0 || c.Cancelled > 0 || c.Failed > 0 }

// of is the retention of a final state; 0 keeps.
func (c RetentionConfig) of(s contracts.Status) time.Duration {
	switch s {
	case contracts.StatusSuccess:
		return c.Success
	case contracts.StatusCancelled:
		return c.Cancelled
	case contracts.StatusFailed, contracts.StatusTimeout:
		return c.Failed
	}
	return 0
}

func (c RetentionConfig) withDefaults() RetentionConfig {
	if c.Every <= 0 {
		c.Every = RetentionEveryDefault
	}
	if c.Batch <= 0 {
		c.Batch = RetentionBatchDefault
	}
	if c.PassBatches <= 0 {
		c.PassBatches = RetentionPassDefault
	}
	if c.Pause <= 0 {
		c.Pause = RetentionPauseDefault
	}
	if c.LeaseTTL <= 0 {
		c.LeaseTTL = RetentionLeaseTTLDefault
	}
	if c.Holder == "" {
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		c.Holder = "reaper/" + hex.EncodeToString(b)
	}
	return c
}

// RetentionPass is what one pass did.
type RetentionPass struct {
	// Pruned counts deleted tasks by state.
	Pruned               map[contracts.Status]int64
	History, DeadLetters int64
	// Workflows counts ended workflows deleted with their last task.
	Workflows int64
	// Busy: another reaper held the lease, so this one did nothing.
	Busy bool
	// More: the pass stopped at its bound with tasks still due.
	More bool
}

// Tasks is the tasks the pass deleted.
func (p RetentionPass) Tasks() int64 {
	var n int64
	for _, v := range p.Pruned {
		n += v
	}
	return n
}

// RunRetention deletes finished tasks past their retention until ctx ends:
// a pass every Every, or right after a pass that stopped at its bound.
// With no retention set it returns at once.
func (r *Reaper) RunRetention(ctx context.Context) error {
	c := r.cfg.Retention.withDefaults()
	if !c.Enabled() {
		return nil
	}
	r.cfg.Retention.Holder = c.Holder
	for {
		wait := c.Every
		pass, err := r.PruneFinished(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			r.logger.Warn("retention pass failed", "err", err)
		case pass.More:
			wait = c.Pause
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// PruneFinished makes one retention pass under the lease: for each final
// state with a retention, batches of its tasks that ended longer ago, each
// its own transaction, until none is due or the pass reaches PassBatches.
// Only one reaper prunes at a time; if the lease is lost mid-pass (a pause
// longer than LeaseTTL), the pass stops. An overlap would only repeat
// deletes, which are idempotent.
func (r *Reaper) PruneFinished(ctx context.Context) (RetentionPass, error) {
	c := r.cfg.Retention.withDefaults()
	pass := RetentionPass{Pruned: map[contracts.Status]int64{}}
	if !c.Enabled() {
		return pass, nil
	}
	key := r.keys.RetentionLease()
	ok, err := r.rdb.SetNX(ctx, key, c.Holder, c.LeaseTTL).Result()
	if err != nil {
		return pass, fmt.Errorf("take retention lease: %w", err)
	}
	if !ok {
		if ok, err = r.renewRetentionLease(ctx, c); err != nil || !ok {
			pass.Busy = true
			return pass, err
		}
	}
	defer func() {
		// Free at once, so the next pass (any reaper's) need not wait out
		// the TTL.
		_ = lease.Release.Run(context.WithoutCancel(ctx), r.rdb, []string{key}, c.Holder).Err()
	}()
	nctx, cancel := context.WithTimeout(ctx, stepTimeout)
	now, err := r.store.DBNow(nctx)
	cancel()
	if err != nil {
		return pass, err
	}
	err = r.pruneStates(ctx, c, now, &pass)
	if n := pass.Tasks(); n > 0 {
		r.logger.Info("pruned finished tasks", "tasks", n, "history", pass.History, "dead_letters", pass.DeadLetters,
			"workflows", pass.Workflows, "success", pass.Pruned[contracts.StatusSuccess], "cancelled", pass.Pruned[contracts.StatusCancelled],
			"failed", pass.Pruned[contracts.StatusFailed]+pass.Pruned[contracts.StatusTimeout], "more", pass.More)
	}
	return pass, err
}

// retentionRestFactor is how many times as long as its last batch took
// pruning rests before the next: a fifth of a connection's time (4) still
// raised the p99 of due-now work by half on a quiet machine
// (docs/benchmarks.md, Retention).
const retentionRestFactor = 9

// errLeaseLost stops a pass whose lease another reaper took.
var errLeaseLost = errors.New("retention lease lost")

// pruneStates runs the batches of one pass, renewing the lease between
// them.
func (r *Reaper) pruneStates(ctx context.Context, c RetentionConfig, now time.Time, pass *RetentionPass) error {
	batches, took := 0, time.Duration(0)
	for _, s := range store.FinalStates {
		keep := c.of(s)
		if keep <= 0 {
			continue
		}
		var from int64 // the scan's start, moved on by every batch
		for {
			if batches == c.PassBatches {
				pass.More = true
				return nil
			}
			if batches > 0 {
				if err := pause(ctx, max(c.Pause, retentionRestFactor*took)); err != nil {
					return err
				}
				if ok, err := r.renewRetentionLease(ctx, c); err != nil || !ok {
					return errors.Join(err, errLeaseLost)
				}
			}
			started := time.Now()
			bctx, cancel := context.WithTimeout(ctx, stepTimeout)
			n, err := r.store.PruneFinished(bctx, store.PruneFinishedParams{Status: s, EndedBefore: now.Add(-keep), Limit: c.Batch, DueFrom: from})
			cancel()
			batches, took, from = batches+1, time.Since(started), n.LastDue
			pass.Pruned[s] += n.Tasks
			pass.History += n.History
			pass.DeadLetters += n.DeadLetters
			pass.Workflows += n.Workflows
			metrics.RetentionPruned.WithLabelValues(string(s)).Add(float64(n.Tasks))
			if err != nil {
				return err
			}
			// Fewer candidates than a batch: none left. None deleted:
			// the rest wait for their events to be published.
			if n.Candidates < c.Batch || n.Tasks == 0 {
				break
			}
		}
	}
	return nil
}

// renewLease extends a lease only while it still holds the given value.

func (r *Reaper) renewRetentionLease(ctx context.Context, c RetentionConfig) (bool, error) {
	n, err := lease.Renew.Run(ctx, r.rdb, []string{r.keys.RetentionLease()}, c.Holder, c.LeaseTTL.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("renew retention lease: %w", err)
	}
	return n == 1, nil
}

func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
