package submitter

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
)

// Reading ages of GET /v1/stats. The work in progress (unfinished states,
// lane backlogs) is read through the state index and kept StatsTTLDefault;
// the finished states take a scan of the whole tasks table (seconds for a
// million tasks), so their counts are kept FinishedStatsTTLDefault. A
// console polling every second then costs MySQL one cheap reading per 5
// seconds and one scan per minute per submitter. Only the first scan is
// waited for: once there is a reading, a stale one is answered while one
// scan in the background replaces it, so no page load pays for the scan.
const (
	StatsTTLDefault         = 5 * time.Second
	FinishedStatsTTLDefault = time.Minute
)

// statsCache holds the last readings. Callers that find one stale wait on
// mu while one of them reads, and then share that reading.
type statsCache struct {
	mu         sync.Mutex
	live       []store.TypeStateCount
	lanes      []store.LaneBacklog
	liveAt     time.Time
	finished   []store.TypeStateCount
	finishedAt time.Time
	// movingWorkflows (RUNNING, COMPENSATING) are read with live, ended
	// ones with finished.
	movingWorkflows, endedWorkflows map[contracts.WorkflowStatus]int64
	// refreshing is set while a background scan replaces finished.
	refreshing bool
}

func (s *Submitter) handleStats(w http.ResponseWriter, r *http.Request) {
	st, err := s.stats(r.Context())
	if err != nil {
		s.internal(w, "read stats", err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Submitter) stats(ctx context.Context) (*contracts.Stats, error) {
	c := &s.statsCache
	c.mu.Lock()
	defer c.mu.Unlock()
	// A reading is as old as its end: on a big table a count takes a while,
	// and a TTL counted from its start could be over at once.
	switch {
	case c.finishedAt.IsZero():
		finished, ended, err := s.countFinished(ctx)
		if err != nil {
			return nil, err
		}
		c.finished, c.endedWorkflows, c.finishedAt = finished, ended, s.clock.Now()
	case s.clock.Now().Sub(c.finishedAt) >= s.cfg.FinishedStatsTTL && !c.refreshing:
		c.refreshing = true
		go s.refreshFinished()
	}
	if c.liveAt.IsZero() || s.clock.Now().Sub(c.liveAt) >= s.cfg.StatsTTL {
		live, err := s.store.CountLiveByTypeState(ctx)
		if err != nil {
			return nil, err
		}
		lanes, err := s.store.LaneBacklogs(ctx, s.clock.Now())
		if err != nil {
			return nil, err
		}
		moving, err := s.store.CountWorkflowsByState(ctx, true)
		if err != nil {
			return nil, err
		}
		c.live, c.lanes, c.movingWorkflows, c.liveAt = live, lanes, moving, s.clock.Now()
	}
	return c.render(), nil
}

// render builds the answer from the cached readings: one entry per type by
// name, lanes in serve order.
func (c *statsCache) render() *contracts.Stats {
	out := &contracts.Stats{At: c.liveAt.UTC(), FinishedAt: c.finishedAt.UTC(), Types: []contracts.TypeStats{},
		Lanes: make([]contracts.LaneStats, len(c.lanes)), Workflows: map[contracts.WorkflowStatus]int64{}}
	maps.Copy(out.Workflows, c.endedWorkflows)
	maps.Copy(out.Workflows, c.movingWorkflows)
	counts := slices.Concat(c.live, c.finished)
	slices.SortFunc(counts, func(a, b store.TypeStateCount) int { return strings.Compare(a.Type, b.Type) })
	for _, cnt := range counts {
		if n := len(out.Types); n == 0 || out.Types[n-1].Type != cnt.Type {
			out.Types = append(out.Types, contracts.TypeStats{Type: cnt.Type, Counts: map[contracts.Status]int64{}})
		}
		out.Types[len(out.Types)-1].Counts[cnt.Status] = cnt.Count
	}
	for i, l := range c.lanes {
		out.Lanes[i] = contracts.LaneStats{Priority: l.Priority, Backlog: l.Count}
		if l.Count > 0 {
			due := time.UnixMilli(l.OldestDue).UTC()
			out.Lanes[i].OldestDue = &due
		}
	}
	return out
}

// refreshFinished scans the finished counts anew, outside the cache's
// lock, and replaces the reading; a failed scan keeps the old one, and the
// next call after the TTL tries again.
func (s *Submitter) refreshFinished() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	finished, ended, err := s.countFinished(ctx)
	c := &s.statsCache
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refreshing = false
	if err != nil {
		s.logger.Warn("counting finished tasks failed; the stats keep the last count", "err", err)
		return
	}
	c.finished, c.endedWorkflows, c.finishedAt = finished, ended, s.clock.Now()
}

// countFinished reads the counts kept FinishedStatsTTL: the finished tasks
// per type and state, and the ended workflows per state.
func (s *Submitter) countFinished(ctx context.Context) ([]store.TypeStateCount, map[contracts.WorkflowStatus]int64, error) {
	finished, err := s.store.CountFinishedByTypeState(ctx)
	if err != nil {
		return nil, nil, err
	}
	ended, err := s.store.CountWorkflowsByState(ctx, false)
	if err != nil {
		return nil, nil, err
	}
	return finished, ended, nil
}
