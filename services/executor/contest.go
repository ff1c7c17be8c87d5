package executor

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/lease"
	"github.com/axsched/ax/services/internal/membership"
	"github.com/axsched/ax/services/internal/store"
)

// errLeaseHeld means a claim found the task's lease held by a live claim of
// the same attempt that has not committed yet: the message comes back
// shortly, when MySQL will say who won, rather than being dropped.
var errLeaseHeld = errors.New("lease held by a claim in flight")

// contest decides a claim that found the task's lease held, and reports
// whether it took the lease over. MySQL decides, not the lease: a lease is
// set before the READY -> RUNNING transfer commits, so a claimant killed in
// between leaves one on a task nobody runs, as long as the task's timeout.
// While the task is still READY at the dispatched attempt, the only lease
// that can matter is a live node's claim of the next attempt, in flight;
// any other (the holder dead or gone from the registry, an older attempt's
// leftover) is taken over with a compare-and-set, so the task runs once its
// claimant misses its heartbeats instead of when the lease expires. A wrong
// guess costs nothing: the transfers are fenced by attempt, so of two
// claims of one attempt only one commits, and the winner's watchdog takes
// its lease back if the loser released it (renew).
//
// It returns (false, nil) when the claim is lost (the task is not READY at
// the dispatched attempt any more), and errLeaseHeld when a live claim
// holds the lease.
func (e *Executor) contest(ctx context.Context, d *events.TaskDispatched, r *run) (bool, error) {
	holder, err := e.rdb.Get(ctx, r.lockKey).Result()
	switch {
	case errors.Is(err, redis.Nil):
		// Released meanwhile: the claim may go on if nobody else took it.
		ok, err := e.rdb.SetNX(ctx, r.lockKey, r.lockVal, r.lockTTL).Result()
		if err == nil && !ok {
			err = errLeaseHeld
		}
		return ok, err
	case err != nil:
		return false, fmt.Errorf("read lease of task %d: %w", d.TaskID, err)
	}
	task, err := e.store.GetTask(ctx, d.TaskID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if task.Status != contracts.StatusReady || task.Attempt != d.Attempt {
		return false, nil
	}
	node, attempt, ok := lease.Parse(holder)
	if ok && attempt == d.Attempt+1 {
		if node == e.cfg.Node {
			return false, errLeaseHeld // a concurrent claim of this node's
		}
		alive, err := membership.Alive(ctx, e.rdb, e.keys.Nodes(), node, e.clock.Now(), membership.DeadAfter(e.cfg.HeartbeatInterval))
		if err != nil {
			return false, err
		}
		if alive {
			return false, errLeaseHeld
		}
	}
	n, err := lease.TakeOver.Run(ctx, e.rdb, []string{r.lockKey}, holder, r.lockVal, r.lockTTL.Milliseconds()).Int()
	if err != nil {
		return false, fmt.Errorf("take over lease of task %d: %w", d.TaskID, err)
	}
	if n == 0 {
		return false, errLeaseHeld // changed under us: look again shortly
	}
	r.tookOver = holder
	e.logger.Info("took over the lease of a claim that never committed", "task_id", d.TaskID,
		"attempt", r.task.Attempt, "holder", holder)
	return true, nil
}
