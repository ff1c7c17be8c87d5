package reaper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/membership"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/retry"
	"github.com/axsched/ax/services/internal/store"
)

// Defaults for Config.
const (
	IntervalDefault     = time.Second
	SilenceDefault      = 15 * time.Second
	TimeoutGraceDefault = 30 * time.Second
	BatchDefault        = 500
	// RenewIntervalDefault is the executors' default renewal period
	// (executor.RenewIntervalDefault).
	RenewIntervalDefault = 5 * time.Second
)

// Config tunes the reaper.
type Config struct {
	// Interval between passes.
	Interval time.Duration
	// Silence is how long a RUNNING task may go without a heartbeat before
	// its lease is checked (3 missed renewals by default).
	Silence time.Duration
	// TimeoutGrace is how long past its timeout a silent attempt may run
	// before the reaper records TIMEOUT.
	TimeoutGrace time.Duration
	// Batch bounds the tasks examined per pass.
	Batch int
	// HeartbeatInterval is the executors' membership heartbeat period; a
	// node that missed three is dead and its tasks are handed on at once.
	HeartbeatInterval time.Duration
	// RenewInterval is how often executors refresh their running tasks'
	// heartbeats in MySQL. A dead node's task whose MySQL heartbeat is
	// younger than RenewInterval plus a second is still being run (the
	// registry in Redis was lost or restored stale), so it is left alone.
	RenewInterval time.Duration
	// OrphanAfter is how long a RUNNING task must keep looking orphaned (no
	// live owner, no lease) before the orphan sweep repairs it; default two
	// heartbeat intervals, so that when Redis loses the registry and the
	// leases together (FLUSHALL, failover) the live executors re-register
	// before their tasks are judged.
	OrphanAfter time.Duration
	// IdempotencyRetention, when positive, is how long idempotency keys
	// are kept: older ones are deleted, a batch a minute. Zero keeps them
	// forever.
	IdempotencyRetention time.Duration
	// Retention is how long finished tasks are kept (RunRetention).
	Retention RetentionConfig
	// Shards is the shard count of the types' rings (0: 64), for the
	// shards-owned gauge; the same as the dispatchers'.
	Shards int
}

// Reaper is the reaper service.
type Reaper struct {
	cfg    Config
	store  *store.Store
	rdb    redis.UniversalClient
	keys   keys.Keys
	clock  clock.Clock
	logger *slog.Logger
	js     jetstream.JetStream

	// suspects are the orphans seen by earlier sweeps, by task ID, waiting
	// for OrphanAfter to pass.
	mu       sync.Mutex
	suspects map[int64]suspect

	// nextDeath is when the first live executor turns dead if it stays
	// silent (unix ns; 0: none registered).
	nextDeath atomic.Int64
	// lastPrune is when idempotency keys were last pruned.
	lastPrune time.Time
	// lastSamplesPrune is when old rollout samples were last deleted.
	lastSamplesPrune time.Time
	// view is what the cluster gauges last showed (observeCluster).
	viewMu sync.Mutex
	view   clusterView
	// lastSuspended is when SUSPEND tasks were last reconciled.
	lastSuspended time.Time
	// suspendedScan is where the next pass over SUSPEND tasks reads on.
	suspendedScan store.SuspendedScan
}

// New builds a reaper.
func New(cfg Config, st *store.Store, rdb redis.UniversalClient, k keys.Keys, clk clock.Clock, logger *slog.Logger) *Reaper {
	if cfg.Interval <= 0 {
		cfg.Interval = IntervalDefault
	}
	if cfg.Silence <= 0 {
		cfg.Silence = SilenceDefault
	}
	if cfg.TimeoutGrace <= 0 {
		cfg.TimeoutGrace = TimeoutGraceDefault
	}
	if cfg.Batch <= 0 {
		cfg.Batch = BatchDefault
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = membership.IntervalDefault
	}
	if cfg.RenewInterval <= 0 {
		cfg.RenewInterval = RenewIntervalDefault
	}
	if cfg.OrphanAfter <= 0 {
		cfg.OrphanAfter = 2 * cfg.HeartbeatInterval
	}
	return &Reaper{cfg: cfg, store: st, rdb: rdb, keys: k, clock: clk, logger: logger.With("service", "reaper"),
		suspects: map[int64]suspect{}}
}

// Run reaps until ctx ends.
func (r *Reaper) Run(ctx context.Context) error {
	t := time.NewTimer(r.cfg.Interval)
	defer t.Stop()
	for {
		started := time.Now()
		r.step(ctx, "dead-node pass", stepTimeout, func(ctx context.Context) error { _, err := r.RecoverDeadNodes(ctx); return err })
		r.step(ctx, "stranded-work pass", stepTimeout, func(ctx context.Context) error { _, err := r.MoveStrandedWork(ctx); return err })
		r.step(ctx, "orphan sweep", stepTimeout, func(ctx context.Context) error { _, _, err := r.RepairOrphans(ctx); return err })
		r.step(ctx, "reaper pass", stepTimeout, func(ctx context.Context) error { _, err := r.RunOnce(ctx); return err })
		r.step(ctx, "rollout guard", stepTimeout, func(ctx context.Context) error { _, err := r.GuardRollouts(ctx); return err })
		if time.Since(r.lastSuspended) >= suspendedEvery {
			r.lastSuspended = time.Now()
			r.step(ctx, "suspended-task pass", stepTimeout, func(ctx context.Context) error { _, err := r.SettleSuspended(ctx); return err })
		}
		if r.cfg.IdempotencyRetention > 0 && time.Since(r.lastPrune) >= pruneEvery {
			r.lastPrune = time.Now()
			// Batch after batch until none is left: a large backlog may
			// take longer than one step, and goes on a minute later.
			r.step(ctx, "prune idempotency keys", pruneEvery/2, func(ctx context.Context) error {
				_, err := r.PruneIdempotencyKeys(ctx)
				return err
			})
		}
		t.Reset(r.untilNextPass(started))
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// stepTimeout bounds one step of a pass (and each retention batch). A
// MySQL or Redis that stopped answering fails the step rather than
// holding the loop, and every step behind it, until the driver's read
// timeout; the next pass tries again.
const stepTimeout = 10 * time.Second

// step runs one step of a pass under timeout and logs its failure.
func (r *Reaper) step(ctx context.Context, name string, timeout time.Duration, fn func(ctx context.Context) error) {
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := fn(sctx); err != nil && ctx.Err() == nil {
		r.logger.Warn(name+" failed", "err", err)
	}
}

// pruneEvery and pruneBatch pace the pruning of idempotency keys: small
// deletes, so a backlog of old keys never holds locks for long.
const (
	pruneEvery = time.Minute
	pruneBatch = 10000
)

// PruneIdempotencyKeys deletes idempotency keys older than the retention,
// a batch at a time until none is left (or ctx ends). It returns how many
// went.
func (r *Reaper) PruneIdempotencyKeys(ctx context.Context) (int64, error) {
	var total int64
	for ctx.Err() == nil {
		n, err := r.store.PruneIdempotencyKeys(ctx, r.cfg.IdempotencyRetention, pruneBatch)
		total += n
		metrics.IdempotencyKeysPruned.Add(float64(n))
		if err != nil || n < pruneBatch {
			if total > 0 {
				r.logger.Info("pruned idempotency keys", "keys", total, "retention", r.cfg.IdempotencyRetention)
			}
			return total, err
		}
	}
	return total, ctx.Err()
}

// untilNextPass is the pass interval, or less when a live executor turns
// dead sooner (if it stays silent): a dead node's tasks move on within
// milliseconds of the third missed heartbeat rather than up to a pass
// later.
func (r *Reaper) untilNextPass(started time.Time) time.Duration {
	wait := r.cfg.Interval - time.Since(started)
	if next := r.nextDeath.Load(); next != 0 {
		// Both instants are on the scheduler clock, as heartbeats are.
		if until := time.Duration(next - r.clock.Now().UnixNano()); until >= 0 && until+10*time.Millisecond < wait {
			wait = until + 10*time.Millisecond
		}
	}
	return max(wait, 10*time.Millisecond)
}

// RunOnce examines silent RUNNING tasks once and returns how many it
// recovered (returned to READY or timed out).
func (r *Reaper) RunOnce(ctx context.Context) (int, error) {
	silent, err := r.store.SilentRunning(ctx, r.cfg.Silence, r.cfg.TimeoutGrace, r.cfg.Batch)
	if err != nil {
		return 0, err
	}
	if len(silent) == 0 {
		return 0, nil
	}
	pipe := r.rdb.Pipeline()
	exists := make([]*redis.IntCmd, len(silent))
	for i, s := range silent {
		exists[i] = pipe.Exists(ctx, r.keys.Lock(s.ID))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, fmt.Errorf("check leases: %w", err)
	}
	recovered := 0
	for i, s := range silent {
		var err error
		switch {
		case s.PastDeadline:
			err = r.timeOut(ctx, s)
		case exists[i].Val() > 0:
			continue
		default:
			err = r.requeue(ctx, s)
		}
		switch {
		case errors.Is(err, store.ErrConflict):
			continue
		case err != nil:
			return recovered, err
		}
		recovered++
	}
	return recovered, nil
}

func (r *Reaper) requeue(ctx context.Context, s store.RunningRef) error {
	attempt := s.Attempt
	_, err := r.store.Transfer(ctx, store.TransferParams{
		TaskID: s.ID, From: contracts.StatusRunning, To: contracts.StatusReady, Attempt: &attempt, Route: events.RouteDispatch,
		ClearExecutor: true,
		Reason: fmt.Sprintf("lease expired: executor %s silent since %s", s.Executor,
			s.LastHeartbeat.UTC().Format(time.RFC3339Nano)),
	})
	if err == nil {
		metrics.ReaperRecovered.Inc()
		r.logger.Info("returned task of silent executor", "task_id", s.ID, "attempt", s.Attempt, "executor", s.Executor)
	}
	return err
}

func (r *Reaper) timeOut(ctx context.Context, s store.RunningRef) error {
	t, err := r.store.GetType(ctx, s.Type)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	msg := fmt.Sprintf("no heartbeat from %s since %s and past the timeout plus %s grace",
		s.Executor, s.LastHeartbeat.UTC().Format(time.RFC3339Nano), r.cfg.TimeoutGrace)
	steps := retry.Plan(retry.Failure{
		TaskID: s.ID, Type: s.Type, Attempt: s.Attempt, RetryCount: s.RetryCount, MaxRetries: s.MaxRetries,
		Status: contracts.StatusTimeout, Error: msg, Reason: "timed out by the reaper: " + msg,
	}, retry.PolicyOf(t), r.clock.Now().UnixMilli(), nil)
	// The hung executor's lease and slot would block the next attempt's
	// claim; they go before the transfer, which makes the task claimable.
	r.releaseDeadClaim(ctx, s)
	if _, err := r.store.TransferChain(ctx, steps...); err != nil {
		return err
	}
	metrics.ReaperTimedOut.WithLabelValues(s.Type).Inc()
	r.logger.Info("timed out silent task", "task_id", s.ID, "attempt", s.Attempt, "executor", s.Executor)
	return nil
}
