// Package reaper returns the work of dead executors.
//
// Every Interval it looks in MySQL for RUNNING tasks whose heartbeat is
// older than Silence (judged on the database clock). For each, it checks the
// task's Redis lease: a lease that still exists belongs to a live executor
// (Redis and MySQL may disagree briefly) and is left alone; a task whose
// lease is gone is transferred RUNNING -> READY, fenced by the attempt it
// was seen with, so it runs again elsewhere. A crash therefore costs at most
// one duplicate run.
//
// Replicas: any number may run. The fenced transfer is the atomic claim:
// when two reapers race for one task, exactly one transfer succeeds and the
// other gets a conflict, which is ignored.
package reaper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
)

// Defaults for Config.
const (
	IntervalDefault = 5 * time.Second
	SilenceDefault  = 15 * time.Second
	BatchDefault    = 500
)

// Config tunes the reaper.
type Config struct {
	// Interval between passes.
	Interval time.Duration
	// Silence is how long a RUNNING task may go without a heartbeat before
	// its lease is checked (3 missed renewals by default).
	Silence time.Duration
	// Batch bounds the tasks examined per pass.
	Batch int
}

// Reaper is the reaper service.
type Reaper struct {
	cfg    Config
	store  *store.Store
	rdb    redis.UniversalClient
	keys   keys.Keys
	logger *slog.Logger
}

// New builds a reaper.
func New(cfg Config, st *store.Store, rdb redis.UniversalClient, k keys.Keys, logger *slog.Logger) *Reaper {
	if cfg.Interval <= 0 {
		cfg.Interval = IntervalDefault
	}
	if cfg.Silence <= 0 {
		cfg.Silence = SilenceDefault
	}
	if cfg.Batch <= 0 {
		cfg.Batch = BatchDefault
	}
	return &Reaper{cfg: cfg, store: st, rdb: rdb, keys: k, logger: logger.With("service", "reaper")}
}

// Run reaps until ctx ends.
func (r *Reaper) Run(ctx context.Context) error {
	t := time.NewTicker(r.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
			r.logger.Warn("reaper pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// RunOnce examines silent RUNNING tasks once and returns how many it
// returned to READY.
func (r *Reaper) RunOnce(ctx context.Context) (int, error) {
	silent, err := r.store.SilentRunning(ctx, r.cfg.Silence, r.cfg.Batch)
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
		if exists[i].Val() > 0 {
			continue
		}
		attempt := s.Attempt
		_, err := r.store.Transfer(ctx, store.TransferParams{
			TaskID: s.ID, From: contracts.StatusRunning, To: contracts.StatusReady, Attempt: &attempt,
			ClearExecutor: true,
			Reason: fmt.Sprintf("lease expired: executor %s silent since %s", s.Executor,
				s.LastHeartbeat.UTC().Format(time.RFC3339Nano)),
		})
		switch {
		case errors.Is(err, store.ErrConflict):
			continue
		case err != nil:
			return recovered, err
		}
		recovered++
		metrics.ReaperRecovered.Inc()
		r.logger.Info("returned task of silent executor", "task_id", s.ID, "attempt", s.Attempt, "executor", s.Executor)
	}
	return recovered, nil
}
