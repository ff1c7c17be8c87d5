package main

import (
	"context"
	"log/slog"
	"os"
	"sync/atomic"
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
