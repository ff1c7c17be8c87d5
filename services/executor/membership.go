package executor

import (
	"context"
	"sort"
	"strconv"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/membership"
	"github.com/axsched/ax/services/internal/metrics"
)

// Version is reported in heartbeats; set at build time with
// -ldflags "-X github.com/axsched/ax/services/executor.Version=...".
var Version = "dev"

// version is what the node reports and records: its label, or the build's.
func (e *Executor) version() string {
	if e.cfg.VersionLabel != "" {
		return e.cfg.VersionLabel
	}
	return Version
}

// beat registers this node with its running tasks every HeartbeatInterval
// until ctx ends (intake stopped), then leaves the registry so a node that
// is draining is never taken for dead. first is closed once the first
// heartbeat was tried: the node takes no lease before it is in the
// registry, where a claim that finds its lease looks for it (contest).
func (e *Executor) beat(ctx context.Context, first chan<- struct{}) {
	started := e.clock.Now().UTC()
	types := make([]string, 0, len(e.types))
	capacity := 0
	for name, p := range e.types {
		types = append(types, name)
		capacity += cap(p.slots)
	}
	sort.Strings(types)
	t := time.NewTicker(e.cfg.HeartbeatInterval)
	defer t.Stop()
	for {
		// A settling run's task is still RUNNING here until its outcome
		// is recorded.
		runs, settling := e.snapshot()
		runs = append(runs, settling...)
		running := make([]string, len(runs))
		for i, r := range runs {
			running[i] = strconv.FormatInt(r.task.ID, 10)
		}
		sort.Strings(running)
		// The write is not cut short when ctx ends: a heartbeat abandoned
		// mid-flight could still land after the Leave below and put a
		// draining node back in the registry, where it would soon look dead
		// and the reaper would take its running tasks away.
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.HeartbeatInterval)
		err := membership.Beat(bctx, e.rdb, e.keys.Nodes(), contracts.Node{
			Name: e.cfg.Node, Addr: e.cfg.Addr, Version: e.version(), Types: types, Capacity: capacity,
			Running: running, StartedAt: started, LastHeartbeat: e.clock.Now().UTC(),
		})
		cancel()
		if err != nil {
			metrics.ExecutorHeartbeatFailures.Inc()
			e.logger.Warn("heartbeat failed", "err", err)
		}
		if first != nil {
			close(first)
			first = nil
		}
		select {
		case <-ctx.Done():
			lctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if err := membership.Leave(lctx, e.rdb, e.keys.Nodes(), e.cfg.Node); err != nil {
				e.logger.Warn("leave the registry failed; the node will look dead", "err", err)
			}
			return
		case <-t.C:
		}
	}
}
