package reaper

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/membership"
	"github.com/axsched/ax/services/internal/metrics"
)

// WithWork lets the reaper move work left on the subjects of executor
// nodes that are gone (see MoveStrandedWork); without it that step is
// skipped.
func (r *Reaper) WithWork(js jetstream.JetStream) *Reaper {
	r.js = js
	return r
}

// MoveStrandedWork finds task messages waiting on the subject of a node
// that is not alive in the registry (or no longer serves the type): a node
// that died with work queued for it, or work a dispatcher with a stale view
// sent to a node that had just left. Each becomes a due command again, so
// the dispatcher routes it to its shard's current owner. One stream query
// per pass finds them; it returns how many it moved.
func (r *Reaper) MoveStrandedWork(ctx context.Context) (int, error) {
	if r.js == nil {
		return 0, nil
	}
	stream, err := r.js.Stream(ctx, events.StreamWork)
	if err != nil {
		return 0, fmt.Errorf("work stream: %w", err)
	}
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(events.ExecAll))
	if err != nil {
		return 0, fmt.Errorf("work stream subjects: %w", err)
	}
	var serving map[string]map[string]bool // token -> types
	moved := 0
	for subject, count := range info.State.Subjects {
		lane, taskType, token, ok := events.ParseExecSubject(subject)
		if count == 0 || !ok || token == events.SharedToken {
			continue
		}
		if serving == nil {
			nodes, err := membership.List(ctx, r.rdb, r.keys.Nodes(), r.clock.Now(), membership.DeadAfter(r.cfg.HeartbeatInterval))
			if err != nil {
				return moved, err
			}
			serving = map[string]map[string]bool{}
			for _, n := range nodes {
				if !n.Alive {
					continue
				}
				types := map[string]bool{}
				for _, t := range n.Types {
					types[t] = true
				}
				serving[events.NodeToken(n.Name)] = types
			}
		}
		if serving[token][taskType] {
			continue
		}
		c, err := r.js.CreateOrUpdateConsumer(ctx, events.StreamWork, bus.ExecConsumerConfig(taskType, lane, token))
		if err != nil {
			return moved, fmt.Errorf("bind %s: %w", subject, err)
		}
		n, err := bus.MoveToDue(ctx, r.js, c, lane)
		moved += n
		if err != nil {
			return moved, err
		}
	}
	if moved > 0 {
		metrics.ReaperStrandedMoved.Add(float64(moved))
		r.logger.Info("moved work stranded on departed nodes' subjects", "tasks", moved)
	}
	return moved, nil
}
