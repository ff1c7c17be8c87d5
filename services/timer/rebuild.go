package timer

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
)

const rebuildPage = 5000

// ensureIndex rebuilds the lanes from MySQL when the generation key is
// missing. Only the replica that wins SET NX rebuilds; it reports whether
// this call did. READY tasks added by events during the rebuild are simply
// indexed twice (ZADD is idempotent).
func (t *Timer) ensureIndex(ctx context.Context) (bool, error) {
	won, err := t.rdb.SetNX(ctx, t.keys.Generation(), ulid.Make().String(), 0).Result()
	if err != nil {
		return false, fmt.Errorf("claim index generation: %w", err)
	}
	if !won {
		return false, nil
	}
	start := time.Now()
	var after *store.DueRef
	total := 0
	for {
		pctx, cancel := context.WithTimeout(ctx, statementTimeout)
		page, err := t.store.ReadyPage(pctx, after, rebuildPage)
		cancel()
		if err != nil {
			// Let the next pass retry the rebuild from scratch.
			t.rdb.Del(context.WithoutCancel(ctx), t.keys.Generation())
			return false, fmt.Errorf("rebuild index: %w", err)
		}
		if err := t.Index(ctx, page); err != nil {
			t.rdb.Del(context.WithoutCancel(ctx), t.keys.Generation())
			return false, fmt.Errorf("rebuild index: %w", err)
		}
		total += len(page)
		if len(page) < rebuildPage {
			break
		}
		after = &page[len(page)-1]
	}
	metrics.TimerRebuilds.Inc()
	t.logger.Info("rebuilt due-time index from MySQL", "ready_tasks", total, "took", time.Since(start))
	t.Wake()
	return true, nil
}

func (t *Timer) reconcileLoop(ctx context.Context) error {
	ticker := time.NewTicker(t.cfg.ReconcileInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		}
		if _, err := t.Reconcile(ctx); err != nil && ctx.Err() == nil {
			t.logger.Warn("reconcile failed", "err", err)
		}
	}
}

// markSkewMs is how far apart two processes' scheduler clocks may be
// (each follows Redis TIME): a dispatch mark further than this before a
// task's due time is from an earlier attempt.
const markSkewMs = 50

// reconcilePages bounds how many pages of candidates one reconcile pass
// reads: under a deep backlog most candidates were dispatched and are
// merely waiting for an executor.
const reconcilePages = 10

// Reconcile re-indexes READY tasks that are overdue by more than the grace
// period and have not been dispatched recently (the dispatcher's marks in
// Redis) nor since they came due: their READY event or their due command
// was lost. It also trims
// marks too old to matter. It returns how many tasks it re-indexed.
func (t *Timer) Reconcile(ctx context.Context) (int, error) {
	now, err := t.rdb.Time(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("redis time: %w", err)
	}
	recent := now.Add(-t.cfg.RedispatchAfter).UnixMilli()
	if err := t.rdb.ZRemRangeByScore(ctx, t.keys.Dispatched(), "-inf", strconv.FormatInt(recent, 10)).Err(); err != nil {
		return 0, fmt.Errorf("trim dispatch marks: %w", err)
	}
	horizon := now.Add(-t.cfg.ReconcileGrace).UnixMilli()
	total := 0
	var after *store.DueRef
	for range reconcilePages {
		pctx, cancel := context.WithTimeout(ctx, statementTimeout)
		page, err := t.store.StaleReady(pctx, horizon, t.cfg.ReconcileGrace, after, t.cfg.Batch)
		cancel()
		if err != nil {
			return total, err
		}
		if len(page) == 0 {
			break
		}
		after = &page[len(page)-1]
		members := make([]string, len(page))
		for i, r := range page {
			members[i] = strconv.FormatInt(r.ID, 10)
		}
		marks, err := t.rdb.ZMScore(ctx, t.keys.Dispatched(), members...).Result()
		if err != nil {
			return total, fmt.Errorf("read dispatch marks: %w", err)
		}
		var stale []store.DueRef
		for i, r := range page {
			// A missing member scores 0: never dispatched, or long ago. A
			// mark older than the task's due time belongs to an earlier
			// attempt (a retry's backoff starts after its attempt ran):
			// it says nothing of this one, which a killed timer may hold.
			if marks[i] <= float64(recent) || marks[i] < float64(r.NextRunTimeMs-markSkewMs) {
				stale = append(stale, r)
			}
		}
		if err := t.Index(ctx, stale); err != nil {
			return total, err
		}
		total += len(stale)
		if len(page) < t.cfg.Batch {
			break
		}
	}
	if total > 0 {
		metrics.TimerReconciled.Add(float64(total))
		t.logger.Info("re-indexed stale READY tasks", "count", total)
	}
	return total, nil
}
