package reaper

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/lease"
	"github.com/axsched/ax/services/internal/membership"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
)

// forgetAfter is how long a dead node stays in the registry (for `ax nodes`)
// after its tasks were handed on.
const forgetAfterBeats = 20

// RecoverDeadNodes hands on, at once, the RUNNING tasks of every executor
// that missed three heartbeats: RUNNING -> READY fenced by attempt, its lease
// and its cluster-limit slot removed, so recovery takes a heartbeat timeout
// plus one pass instead of a whole lease. The registry lives in Redis, which
// only suggests: a task moves only once its heartbeat in MySQL is older than
// the executors' RenewInterval plus a second too, so a registry restored
// stale (a lagging replica, an old snapshot) cannot take healthy tasks away.
// It returns how many tasks moved.
func (r *Reaper) RecoverDeadNodes(ctx context.Context) (int, error) {
	now := r.clock.Now()
	nodes, err := membership.List(ctx, r.rdb, r.keys.Nodes(), now, membership.DeadAfter(r.cfg.HeartbeatInterval))
	if err != nil {
		return 0, err
	}
	r.observeCluster(ctx, nodes)
	var dead []string
	last := map[string]time.Time{}
	var next time.Time
	for _, n := range nodes {
		if n.Alive {
			// The moment this node turns dead if it stays silent: the
			// reaper wakes for it rather than up to a pass later.
			if at := n.LastHeartbeat.Add(membership.DeadAfter(r.cfg.HeartbeatInterval)); next.IsZero() || at.Before(next) {
				next = at
			}
			continue
		}
		dead = append(dead, n.Name)
		last[n.Name] = n.LastHeartbeat
		if now.Sub(n.LastHeartbeat) > forgetAfterBeats*r.cfg.HeartbeatInterval {
			_ = membership.Leave(ctx, r.rdb, r.keys.Nodes(), n.Name)
		}
	}
	r.nextDeath.Store(next.UnixNano())
	if len(dead) == 0 {
		return 0, nil
	}
	// MySQL confirms: only tasks whose heartbeat there stopped too move.
	tasks, err := r.store.RunningOn(ctx, dead, r.cfg.RenewInterval+time.Second, r.cfg.Batch)
	if err != nil {
		return 0, err
	}
	chains := make([][]store.TransferParams, len(tasks))
	for i, s := range tasks {
		// Release first: once READY is committed the task may be claimed
		// within milliseconds, and a claim that finds the dead lease loses.
		r.releaseDeadClaim(ctx, s)
		attempt := s.Attempt
		chains[i] = []store.TransferParams{{
			TaskID: s.ID, From: contracts.StatusRunning, To: contracts.StatusReady, Attempt: &attempt, Route: events.RouteDispatch,
			ClearExecutor: true,
			Reason: fmt.Sprintf("executor %s is dead: missed %d heartbeats, last at %s", s.Executor,
				membership.MissedBeats, last[s.Executor].UTC().Format(time.RFC3339Nano)),
		}}
	}
	// All of them in one transaction: they run again a commit later, not
	// a commit per task later.
	out, err := r.store.TransferBatch(ctx, chains)
	if err != nil {
		return 0, err
	}
	moved := 0
	for _, res := range out {
		if res.Err == nil {
			moved++
			metrics.ReaperRecovered.Inc()
		} else if !errors.Is(res.Err, store.ErrConflict) {
			r.logger.Warn("hand on a dead executor's task", "err", res.Err)
		}
	}
	if moved > 0 {
		r.logger.Info("handed on tasks of dead executors", "count", moved, "executors", dead)
	}
	return moved, nil
}

// releaseDeadClaim removes the dead attempt's lease and its member of the
// type's running set, which would otherwise block the retry's claim and hold
// a concurrency slot until they expire.
func (r *Reaper) releaseDeadClaim(ctx context.Context, s store.RunningRef) {
	value := lease.Value(s.Executor, s.Attempt)
	if err := lease.Release.Run(ctx, r.rdb, []string{r.keys.Lock(s.ID)}, value).Err(); err != nil {
		r.logger.Warn("remove dead lease failed; it expires by itself", "task_id", s.ID, "err", err)
	}
	set := r.keys.RunningSet(s.Type)
	pattern := strconv.FormatInt(s.ID, 10) + "@" + value + "#*"
	iter := r.rdb.ZScan(ctx, set, 0, pattern, 100).Iterator()
	for iter.Next(ctx) {
		member := iter.Val()
		if !iter.Next(ctx) { // ZSCAN yields member, score pairs
			break
		}
		r.rdb.ZRem(ctx, set, member)
	}
}
