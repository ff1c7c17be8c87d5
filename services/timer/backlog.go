package timer

import (
	"context"
	"fmt"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/metrics"
)

// BacklogSampleDefault is how often the timer samples its lanes' backlog.
const BacklogSampleDefault = 5 * time.Second

// LaneBacklog is what one lane holds that is due: how many tasks, and how
// long the oldest of them has been due.
type LaneBacklog struct {
	Lane  contracts.Priority
	Tasks int64
	Age   time.Duration
}

// Backlog reads each lane's due tasks in one script on the Redis clock
// and sets ax_timer_backlog_tasks and ax_timer_backlog_age_seconds. Every
// replica samples the same shared lanes; aggregate with max.
func (t *Timer) Backlog(ctx context.Context) ([]LaneBacklog, error) {
	res, err := backlogScript.Run(ctx, t.rdb, t.keys.Lanes()).Slice()
	if err != nil {
		return nil, fmt.Errorf("sample lane backlog: %w", err)
	}
	if len(res) != 1+2*len(contracts.Priorities) {
		return nil, fmt.Errorf("sample lane backlog: %d values for %d lanes", len(res), len(contracts.Priorities))
	}
	now := toInt(res[0])
	out := make([]LaneBacklog, len(contracts.Priorities))
	for i, p := range contracts.Priorities {
		b := LaneBacklog{Lane: p, Tasks: toInt(res[1+2*i])}
		if first := toInt(res[2+2*i]); b.Tasks > 0 && first >= 0 && first < now {
			b.Age = time.Duration(now-first) * time.Millisecond
		}
		out[i] = b
		metrics.TimerBacklogTasks.WithLabelValues(string(p)).Set(float64(b.Tasks))
		metrics.TimerBacklogAge.WithLabelValues(string(p)).Set(b.Age.Seconds())
	}
	return out, nil
}

// backlogLoop samples the backlog every BacklogSample until ctx ends.
func (t *Timer) backlogLoop(ctx context.Context) error {
	tick := time.NewTicker(t.cfg.BacklogSample)
	defer tick.Stop()
	for {
		if _, err := t.Backlog(ctx); err != nil && ctx.Err() == nil {
			t.logger.Debug("backlog sample failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
