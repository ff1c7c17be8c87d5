package main

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/axsched/ax/services/executor"
)

// faultKillAfterLease reads AX_FAULT_KILL_AFTER_LEASE=N, a fault-injection
// setting for `make chaos` only: the executor kills itself (SIGKILL, no
// clean-up) right after taking the leases of its N-th claim, before the
// claim's READY→RUNNING transfer commits — the window in which a dead
// claimant once held a READY task until its lease expired. It has no flag
// on purpose: nobody should find it in --help.
func faultKillAfterLease(logger *slog.Logger) func(context.Context, []int64) error {
	n := envInt("AX_FAULT_KILL_AFTER_LEASE", 0)
	if n <= 0 {
		return nil
	}
	logger.Warn("fault injection armed: this executor kills itself after taking leases", "claim", n)
	var claims atomic.Int64
	return func(_ context.Context, ids []int64) error {
		if claims.Add(1) != int64(n) {
			return nil
		}
		logger.Warn("fault injection: killed between lease and claim", "task_ids", ids)
		if p, err := os.FindProcess(os.Getpid()); err == nil {
			_ = p.Kill()
		}
		select {} // the kill takes the process with it
	}
}

// faultSlower reads AX_FAULT_SLOWER=F (F > 1), a fault-injection setting
// for tests of gray releases only: every handler of this executor takes F
// times as long (it waits (F-1) × its own run time after returning), a new
// version that is slower than the old. No flag, like the one above.
func faultSlower(types []executor.TypeSpec, logger *slog.Logger) []executor.TypeSpec {
	f, err := strconv.ParseFloat(os.Getenv("AX_FAULT_SLOWER"), 64)
	if err != nil || f <= 1 {
		return types
	}
	logger.Warn("fault injection armed: every handler of this executor is slower", "factor", f)
	out := make([]executor.TypeSpec, len(types))
	for i, spec := range types {
		h := spec.Handler
		spec.Handler = executor.HandlerFunc(func(ctx context.Context, t *executor.Task) error {
			start := time.Now()
			err := h.Handle(ctx, t)
			time.Sleep(time.Duration(float64(time.Since(start)) * (f - 1)))
			return err
		})
		out[i] = spec
	}
	return out
}
