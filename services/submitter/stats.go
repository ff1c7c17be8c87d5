package submitter

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/axsched/ax/contracts"
)

// StatsTTLDefault is how long GET /v1/stats serves one reading: counting
// per type and state reads the whole tasks table, so a console or a script
// polling it every second costs MySQL one count per TTL, not one per call.
const StatsTTLDefault = 5 * time.Second

// statsCache holds the last reading. Callers that find it stale wait on mu
// while one of them reads, and then share that reading.
type statsCache struct {
	mu    sync.Mutex
	value *contracts.Stats
	at    time.Time
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
	now := s.clock.Now()
	if c.value != nil && now.Sub(c.at) < s.cfg.StatsTTL {
		return c.value, nil
	}
	counts, err := s.store.CountByTypeState(ctx)
	if err != nil {
		return nil, err
	}
	lanes, err := s.store.LaneBacklogs(ctx, now)
	if err != nil {
		return nil, err
	}
	out := &contracts.Stats{At: now.UTC(), Types: []contracts.TypeStats{}, Lanes: make([]contracts.LaneStats, len(lanes))}
	for _, cnt := range counts {
		if n := len(out.Types); n == 0 || out.Types[n-1].Type != cnt.Type {
			out.Types = append(out.Types, contracts.TypeStats{Type: cnt.Type, Counts: map[contracts.Status]int64{}})
		}
		out.Types[len(out.Types)-1].Counts[cnt.Status] = cnt.Count
	}
	for i, l := range lanes {
		out.Lanes[i] = contracts.LaneStats{Priority: l.Priority, Backlog: l.Count}
		if l.Count > 0 {
			due := time.UnixMilli(l.OldestDue).UTC()
			out.Lanes[i].OldestDue = &due
		}
	}
	c.value, c.at = out, now
	return out, nil
}
