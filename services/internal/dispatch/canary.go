package dispatch

import (
	"context"
	"strconv"
	"time"

	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/rollout"
	"github.com/axsched/ax/services/internal/store"
)

// canaries answers, for one batch, which types are in rollout, reading
// each type once (through the one-second cache of type settings).
type canaries struct {
	s     *Sender
	types map[string]*store.Canary
}

func (s *Sender) canaries() *canaries { return &canaries{s: s} }

func (c *canaries) of(ctx context.Context, taskType string) *store.Canary {
	if v, ok := c.types[taskType]; ok {
		return v
	}
	var v *store.Canary
	if t, err := c.s.types.Get(ctx, taskType); err == nil {
		v = t.Canary
	}
	if c.types == nil {
		c.types = map[string]*store.Canary{}
	}
	c.types[taskType] = v
	return v
}

// Place routes the tasks of types in rollout by version (the rest are
// left to Messages' plain routing) and returns those that wait: a task
// that ran keeps the version it ran on (Pinned); a new one goes to the
// canary when its key hashes below the percent. The chosen side's ring of
// live nodes picks the node. While the side has no live node, the task
// waits as long as the side was last seen within the grace, then falls
// back to the other side, which the dispatch records (FallbackFrom); with
// no live node of either, plain routing sends it to the type's shared
// subject, so nothing is stranded.
func (s *Sender) Place(ctx context.Context, tasks []Task) (ready, waiting []Task) {
	table := s.router.Table()
	cs := s.canaries()
	now := time.Now()
	for _, t := range tasks {
		c := cs.of(ctx, t.Dispatch.Type)
		if c == nil {
			ready = append(ready, t)
			continue
		}
		d := &t.Dispatch
		key := t.Key
		if key == "" {
			key = strconv.FormatInt(d.TaskID, 10)
		}
		onCanary := t.Pinned == c.Version || (t.Pinned == "" && rollout.OnCanary(key, c.Percent))
		side := sideName(onCanary)
		if owner, ok := table.VersionOwner(d.Type, c.Version, onCanary, d.TaskID); ok {
			t.placed = events.NodeToken(owner)
			metrics.RolloutRouted.WithLabelValues(d.Type, side).Inc()
			ready = append(ready, t)
			continue
		}
		if now.Sub(s.router.LastSeen(d.Type, c.Version, onCanary)) < c.Grace {
			waiting = append(waiting, t)
			continue
		}
		owner, ok := table.VersionOwner(d.Type, c.Version, !onCanary, d.TaskID)
		if !ok {
			// Nobody of either side: the shared subject, as without rollout.
			t.placed = events.SharedToken
			ready = append(ready, t)
			continue
		}
		t.placed = events.NodeToken(owner)
		d.FallbackFrom = side
		if onCanary {
			d.FallbackFrom = c.Version
		}
		metrics.RolloutFallbacks.WithLabelValues(d.Type, side).Inc()
		s.logger.Info("no live executor of the task's version past the grace; falling back",
			"task_id", d.TaskID, "type", d.Type, "wanted", side, "grace", c.Grace)
		ready = append(ready, t)
	}
	return ready, waiting
}

// sideName labels the two sides of a rollout in metrics.
func sideName(onCanary bool) string {
	if onCanary {
		return "canary"
	}
	return "stable"
}

// InRollout returns, for one batch, whether a type is in rollout (nil-safe
// for unknown or empty types).
func (s *Sender) InRollout(ctx context.Context) func(taskType string) bool {
	cs := s.canaries()
	return func(taskType string) bool { return taskType != "" && cs.of(ctx, taskType) != nil }
}
