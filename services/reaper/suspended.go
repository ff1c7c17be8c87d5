package reaper

import (
	"context"
	"time"

	"github.com/axsched/ax/services/internal/metrics"
)

// suspendedEvery paces the reconciler of SUSPEND tasks, and suspendedGrace
// is how long a child must have waited untouched before it is judged: the
// parents' own transfers settle children in the transaction that ends
// them, so the reconciler only catches what slipped, and a few seconds
// late is still on time.
const (
	suspendedEvery = 5 * time.Second
	suspendedGrace = 5 * time.Second
)

// SettleSuspended settles SUSPEND tasks whose parents have all ended (as
// MySQL says) but which nothing released or cancelled, a batch at a time:
// MySQL is the truth, so a missed release delays a child and never
// strands it. Replicas may run it together: each child is settled in a
// transaction that locks it and checks it is still SUSPEND. It returns how
// many tasks it moved.
func (r *Reaper) SettleSuspended(ctx context.Context) (int, error) {
	n, next, err := r.store.ReconcileSuspended(ctx, suspendedGrace.Milliseconds(), r.cfg.Batch, r.suspendedScan)
	r.suspendedScan = next
	if n > 0 {
		metrics.ReaperSuspendedSettled.Add(float64(n))
		r.logger.Warn("settled SUSPEND tasks whose parents had ended", "tasks", n)
	}
	return n, err
}
