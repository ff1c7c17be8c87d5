package reaper

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/membership"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
)

// RepairOrphans is the catch-all for tasks stuck in RUNNING: tasks whose
// executor is not alive in the membership registry (never registered, left,
// forgotten, or dead) and whose lease is gone from Redis. Nobody can finish
// such a task: a live executor would be in the registry, and a running
// handler holds its lease. Once a task has looked orphaned, at the same
// attempt, for OrphanAfter (two heartbeat intervals by default), it goes back
// to READY, fenced by that attempt, without waiting for the heartbeat
// silence the silent-task sweep needs.
//
// The order of the reads is what makes it safe. The registry is read first
// and the leases last; an executor sets a task's lease before it commits
// the claim, so a task claimed by a node that joined after the registry was
// read still shows its lease and is left alone. A task that finishes in
// between is protected by the fence: its RUNNING row is gone, the transfer
// conflicts and is ignored. The wait guards against Redis losing the
// registry and the leases together: live executors are back in the registry
// within one heartbeat, so their tasks stop looking orphaned before the wait
// is over, and are left to their owners.
//
// It pages through every such RUNNING task in id order, so a long run of
// tasks that must be left alone (a draining node's) cannot hide an orphan
// behind the batch limit. It sets ax_reaper_stuck_running to how many
// orphans the sweep found, waiting or not, and returns that and how many it
// repaired.
func (r *Reaper) RepairOrphans(ctx context.Context) (found, repaired int, err error) {
	now := r.clock.Now()
	nodes, err := membership.List(ctx, r.rdb, r.keys.Nodes(), now, membership.DeadAfter(r.cfg.HeartbeatInterval))
	if err != nil {
		return 0, 0, err
	}
	var live []string
	for _, n := range nodes {
		if n.Alive {
			live = append(live, n.Name)
		}
	}
	seen := map[int64]bool{}
	var after int64
	for {
		page, err := r.store.RunningNotOn(ctx, live, after, r.cfg.Batch)
		if err != nil {
			return found, repaired, err
		}
		orphans, err := r.leaseless(ctx, page)
		if err != nil {
			return found, repaired, err
		}
		found += len(orphans)
		for _, s := range orphans {
			seen[s.ID] = true
			if !r.orphanedSince(s, now) {
				continue
			}
			err := r.repairOrphan(ctx, s)
			if errors.Is(err, store.ErrConflict) {
				continue // finished or taken over meanwhile
			}
			if err != nil {
				return found, repaired, err
			}
			repaired++
		}
		if len(page) < r.cfg.Batch {
			break
		}
		after = page[len(page)-1].ID
	}
	r.forgetSuspects(seen)
	metrics.ReaperStuckRunning.Set(float64(found))
	if repaired > 0 {
		r.logger.Warn("repaired RUNNING tasks with no live owner and no lease", "found", found, "repaired", repaired)
	}
	return found, repaired, nil
}

// suspect is an orphan waiting for OrphanAfter to pass.
type suspect struct {
	attempt int
	since   time.Time
}

// orphanedSince records s as an orphan seen at now and reports whether it
// has looked orphaned, at this attempt, for at least OrphanAfter.
func (r *Reaper) orphanedSince(s store.RunningRef, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	sp, ok := r.suspects[s.ID]
	if !ok || sp.attempt != s.Attempt {
		r.suspects[s.ID] = suspect{attempt: s.Attempt, since: now}
		return false
	}
	return now.Sub(sp.since) >= r.cfg.OrphanAfter
}

// forgetSuspects drops the suspects a complete sweep no longer found: they
// finished, were repaired, or have an owner again.
func (r *Reaper) forgetSuspects(seen map[int64]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for id := range r.suspects {
		if !seen[id] {
			delete(r.suspects, id)
		}
	}
}

// leaseless returns the tasks of page whose lease key does not exist.
func (r *Reaper) leaseless(ctx context.Context, page []store.RunningRef) ([]store.RunningRef, error) {
	if len(page) == 0 {
		return nil, nil
	}
	pipe := r.rdb.Pipeline()
	exists := make([]*redis.IntCmd, len(page))
	for i, s := range page {
		exists[i] = pipe.Exists(ctx, r.keys.Lock(s.ID))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("check leases: %w", err)
	}
	var out []store.RunningRef
	for i, s := range page {
		if exists[i].Val() == 0 {
			out = append(out, s)
		}
	}
	return out, nil
}

func (r *Reaper) repairOrphan(ctx context.Context, s store.RunningRef) error {
	// Only the cluster-limit slot can be left; it would hold a slot of the
	// type until it expires.
	r.releaseDeadClaim(ctx, s)
	owner := s.Executor
	if owner == "" {
		owner = "(none)"
	}
	attempt := s.Attempt
	_, err := r.store.Transfer(ctx, store.TransferParams{
		TaskID: s.ID, From: contracts.StatusRunning, To: contracts.StatusReady, Attempt: &attempt, Route: events.RouteDispatch,
		ClearExecutor: true,
		Reason:        fmt.Sprintf("orphaned: executor %s is not alive in the membership registry and holds no lease", owner),
	})
	if err != nil {
		return err
	}
	metrics.ReaperStuckRepaired.Inc()
	r.logger.Info("returned orphaned task", "task_id", s.ID, "attempt", s.Attempt, "executor", owner)
	return nil
}
