// Package route decides which executor node a task goes to: the owner of
// the task's shard (md5 of the ID, modulo the shard count) on the
// consistent hash ring of the live nodes that serve the task's type. Every
// type has its own ring, so a node only ever owns shards of types it
// serves, and any process that reads the same membership computes the same
// owners (the dispatcher routes by them; GET /v1/nodes shows them).
package route

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/membership"
	"github.com/axsched/ax/services/internal/ring"
)

// Table is one snapshot of the routing: a ring per served type.
type Table struct {
	cfg   ring.Config
	rings map[string]*ring.Ring
	key   string // the members and their types, to tell a change
}

// Build computes the rings of the live nodes in nodes.
func Build(nodes []contracts.Node, cfg ring.Config) *Table {
	t := &Table{cfg: cfg, rings: map[string]*ring.Ring{}}
	var key strings.Builder
	for _, n := range nodes {
		if !n.Alive {
			continue
		}
		key.WriteString(n.Name + "=" + strings.Join(n.Types, ",") + ";")
		for _, typ := range n.Types {
			r := t.rings[typ]
			if r == nil {
				r = ring.New(cfg)
				t.rings[typ] = r
			}
			r.Add(n.Name)
		}
	}
	t.key = key.String()
	return t
}

// Shards is the table's shard count.
func (t *Table) Shards() int {
	for _, r := range t.rings {
		return r.Shards()
	}
	return ring.New(t.cfg).Shards()
}

// Owner returns the node that owns the task's shard for its type, or false
// when no live node serves the type.
func (t *Table) Owner(taskType string, taskID int64) (string, bool) {
	r := t.rings[taskType]
	if r == nil {
		return "", false
	}
	owner := r.Owner(ring.Shard(taskID, r.Shards()))
	return owner, owner != ""
}

// TypeShards returns, for every type node serves, the shards it owns.
func (t *Table) TypeShards(node string) map[string][]int {
	out := map[string][]int{}
	for typ, r := range t.rings {
		if shards, ok := r.Assignments()[node]; ok {
			out[typ] = shards
		}
	}
	return out
}

// Router keeps a Table current from the membership registry.
type Router struct {
	rdb       redis.UniversalClient
	key       string
	clock     clock.Clock
	deadAfter time.Duration
	cfg       ring.Config
	logger    *slog.Logger

	mu    sync.RWMutex
	table *Table
}

// RefreshInterval is how often a Router re-reads the registry; a node that
// leaves is routed around within it.
const RefreshInterval = time.Second

// NewRouter returns a router over the registry at key; heartbeat is the
// executors' heartbeat interval (three missed mean dead).
func NewRouter(rdb redis.UniversalClient, key string, clk clock.Clock, heartbeat time.Duration, cfg ring.Config, logger *slog.Logger) *Router {
	if heartbeat <= 0 {
		heartbeat = membership.IntervalDefault
	}
	return &Router{rdb: rdb, key: key, clock: clk, deadAfter: membership.DeadAfter(heartbeat), cfg: cfg,
		logger: logger, table: Build(nil, cfg)}
}

// Refresh re-reads the registry and swaps in a new table when the members
// or their types changed.
func (r *Router) Refresh(ctx context.Context) error {
	nodes, err := membership.List(ctx, r.rdb, r.key, r.clock.Now(), r.deadAfter)
	if err != nil {
		return err
	}
	t := Build(nodes, r.cfg)
	r.mu.Lock()
	changed := t.key != r.table.key
	if changed {
		r.table = t
	}
	r.mu.Unlock()
	if changed {
		r.logger.Info("routing table changed", "members", t.key)
	}
	return nil
}

// Run refreshes every RefreshInterval until ctx ends.
func (r *Router) Run(ctx context.Context) error {
	tick := time.NewTicker(RefreshInterval)
	defer tick.Stop()
	for {
		if err := r.Refresh(ctx); err != nil && ctx.Err() == nil {
			// Keep routing by the last table; a stale owner's subject is
			// swept by the reaper if the owner is gone.
			r.logger.Warn("refresh routing table", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Table returns the current table.
func (r *Router) Table() *Table {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.table
}
