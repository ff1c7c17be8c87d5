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

// Table is one snapshot of the routing: a ring per served type, and for a
// type in rollout, rings of its canary version's nodes and of the others.
type Table struct {
	cfg   ring.Config
	rings map[string]*ring.Ring
	key   string // the members and their types, to tell a change
	// versions are the live nodes of each type by version.
	versions map[string]map[string][]string

	mu    sync.Mutex
	split map[splitKey]*ring.Ring // built on first use
}

type splitKey struct {
	typ, canary string
	onCanary    bool
}

// Build computes the rings of the live nodes in nodes.
func Build(nodes []contracts.Node, cfg ring.Config) *Table {
	t := &Table{cfg: cfg, rings: map[string]*ring.Ring{}, versions: map[string]map[string][]string{}}
	var key strings.Builder
	for _, n := range nodes {
		if !n.Alive {
			continue
		}
		key.WriteString(n.Name + "@" + n.Version + "=" + strings.Join(n.Types, ",") + ";")
		for _, typ := range n.Types {
			if t.versions[typ] == nil {
				t.versions[typ] = map[string][]string{}
			}
			t.versions[typ][n.Version] = append(t.versions[typ][n.Version], n.Name)
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

// VersionOwner returns the owner of the task's shard on the ring of the
// type's live nodes of version canary (onCanary) or of every other
// version, or false when that side has no live node.
func (t *Table) VersionOwner(taskType, canary string, onCanary bool, taskID int64) (string, bool) {
	k := splitKey{typ: taskType, canary: canary, onCanary: onCanary}
	t.mu.Lock()
	r, built := t.split[k]
	if !built {
		r = ring.New(t.cfg)
		for v, names := range t.versions[taskType] {
			if (v == canary) == onCanary {
				for _, n := range names {
					r.Add(n)
				}
			}
		}
		if t.split == nil {
			t.split = map[splitKey]*ring.Ring{}
		}
		t.split[k] = r
	}
	t.mu.Unlock()
	owner := r.Owner(ring.Shard(taskID, r.Shards()))
	return owner, owner != ""
}

// Versions returns, for each version, whether a live node of it serves the
// type.
func (t *Table) Versions(taskType string) map[string]bool {
	out := map[string]bool{}
	for v := range t.versions[taskType] {
		out[v] = true
	}
	return out
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
	// seen is when each type's version last had a live node, by this
	// router's refreshes: how long a version has been gone, for the grace.
	seen map[string]map[string]time.Time
	// started is when the router was made: a version it has not seen yet
	// counts as seen then, so a router that has just started (or not yet
	// heard of a node that joined) does not fall back at once.
	started time.Time
	// every and emptyEvery are Run's RefreshInterval and
	// EmptyRefreshInterval (tests shorten or stretch them).
	every, emptyEvery time.Duration
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
		logger: logger, table: Build(nil, cfg), started: time.Now(), every: RefreshInterval, emptyEvery: EmptyRefreshInterval}
}

// Refresh re-reads the registry and swaps in a new table when the members
// or their types changed.
func (r *Router) Refresh(ctx context.Context) error {
	nodes, err := membership.List(ctx, r.rdb, r.key, r.clock.Now(), r.deadAfter)
	if err != nil {
		return err
	}
	t := Build(nodes, r.cfg)
	now := time.Now()
	r.mu.Lock()
	if r.seen == nil {
		r.seen = map[string]map[string]time.Time{}
	}
	for typ, vs := range t.versions {
		if r.seen[typ] == nil {
			r.seen[typ] = map[string]time.Time{}
		}
		for v := range vs {
			r.seen[typ][v] = now
		}
	}
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

// EmptyRefreshInterval is how often a Router that knows no live node
// re-reads the registry. A process starts its router before its own
// executor's first heartbeat lands: until the table has the node, every
// dispatch goes to the shared subjects (a longer way: stored, fetched by
// whichever node, its row read again), and at RefreshInterval that was
// the first second of every start.
const EmptyRefreshInterval = 100 * time.Millisecond

// Run refreshes every RefreshInterval (EmptyRefreshInterval while no live
// node is known) until ctx ends.
func (r *Router) Run(ctx context.Context) error {
	wait := time.NewTimer(0)
	defer wait.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-wait.C:
		}
		if err := r.Refresh(ctx); err != nil && ctx.Err() == nil {
			// Keep routing by the last table; a stale owner's subject is
			// swept by the reaper if the owner is gone.
			r.logger.Warn("refresh routing table", "err", err)
		}
		next := r.every
		if r.Table().empty() {
			next = r.emptyEvery
		}
		wait.Reset(next)
	}
}

// empty says whether the table knows no live node.
func (t *Table) empty() bool { return len(t.rings) == 0 }

// LastSeen returns when the type last had a live node of version canary
// (onCanary) or of another version, by this router's refreshes; when the
// router started if never since.
func (r *Router) LastSeen(taskType, canary string, onCanary bool) time.Time {
	r.mu.RLock()
	defer r.mu.RUnlock()
	last := r.started
	for v, at := range r.seen[taskType] {
		if (v == canary) == onCanary && at.After(last) {
			last = at
		}
	}
	return last
}

// Table returns the current table.
func (r *Router) Table() *Table {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.table
}
