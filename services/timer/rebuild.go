package timer

import (
	"context"
	"fmt"
	"time"

	"github.com/oklog/ulid/v2"

	"github.com/axsched/ax/services/internal/metrics"
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
	var after int64
	total := 0
	for {
		page, err := t.store.ReadyPage(ctx, after, rebuildPage)
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
		after = page[len(page)-1].ID
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

// Reconcile re-indexes READY tasks that are overdue by more than the grace
// period and have not been dispatched recently: their READY event or their
// due command was lost. It returns how many it re-indexed.
func (t *Timer) Reconcile(ctx context.Context) (int, error) {
	now, err := t.rdb.Time(ctx).Result()
	if err != nil {
		return 0, fmt.Errorf("redis time: %w", err)
	}
	horizon := now.Add(-t.cfg.ReconcileGrace).UnixMilli()
	refs, err := t.store.StaleReady(ctx, horizon, t.cfg.ReconcileGrace, t.cfg.RedispatchAfter, t.cfg.Batch)
	if err != nil {
		return 0, err
	}
	if err := t.Index(ctx, refs); err != nil {
		return 0, err
	}
	if len(refs) > 0 {
		metrics.TimerReconciled.Add(float64(len(refs)))
		t.logger.Info("re-indexed stale READY tasks", "count", len(refs))
	}
	return len(refs), nil
}
