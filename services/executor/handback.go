package executor

import (
	"context"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
)

// handBack runs once the intake has stopped: the tasks still queued on this
// node's own subjects go back to the dispatcher at once, which routes them
// to the shards' new owners (the node has left the registry), and the
// node's consumers are deleted. Anything a dispatcher with a stale view
// sends here afterwards is moved on by the reaper.
func (e *Executor) handBack(intakes []*intake) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	total := 0
	for _, in := range intakes {
		// The feeds stop first and hand back what they held, so that
		// moving the queued work finds it.
		in.close()
		for _, src := range in.srcs {
			if !src.own {
				continue
			}
			lane := contracts.Priorities[src.lane]
			n, err := bus.MoveToDue(ctx, e.conn.JS, src.c, lane)
			total += n
			if err != nil {
				// Left where it is, it is moved on by the reaper.
				e.logger.Warn("hand back queued tasks", "type", in.p.spec.Name, "lane", lane, "err", err)
				continue
			}
			if err := e.conn.JS.DeleteConsumer(ctx, events.StreamWork, src.c.CachedInfo().Name); err != nil {
				e.logger.Debug("delete consumer", "consumer", src.c.CachedInfo().Name, "err", err)
			}
		}
	}
	if total > 0 {
		e.logger.Info("handed back queued tasks", "tasks", total)
	}
}
