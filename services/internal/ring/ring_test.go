package ring

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// names returns n distinct random executor names, the way hosts and pods
// are named, so tests do not depend on a lucky "node-1".."node-n".
func names(rng *rand.Rand, n int) []string {
	out := make([]string, 0, n)
	for len(out) < n {
		name := fmt.Sprintf("executor-%08x", rng.Uint32())
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	return out
}

// ringOf builds a ring holding nodes.
func ringOf(cfg Config, nodes []string) *Ring {
	r := New(cfg)
	for _, n := range nodes {
		r.Add(n)
	}
	return r
}

// busiest returns the largest shard count any node holds divided by the
// mean, after checking that every shard is owned exactly once.
func busiest(t *testing.T, r *Ring) float64 {
	t.Helper()
	total, most := 0, 0
	for _, shards := range r.Assignments() {
		require.True(t, slices.IsSorted(shards))
		total += len(shards)
		most = max(most, len(shards))
	}
	require.Equal(t, r.Shards(), total)
	return float64(most) / (float64(r.Shards()) / float64(len(r.Nodes())))
}

// Each case is run over several random name sets; the worst is asserted.
// The unbounded ring (a load factor no node can reach) is only logged, to
// show what the bound buys.
func TestRingBalance(t *testing.T) {
	tests := []struct {
		nodes, shards int
		limit         float64
	}{
		{nodes: 10, shards: 64, limit: 1.3},
		{nodes: 10, shards: 256, limit: 1.3},
		{nodes: 3, shards: 64, limit: 1.3},
		{nodes: 7, shards: 256, limit: 1.3},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d nodes %d shards", tt.nodes, tt.shards), func(t *testing.T) {
			worst, worstPlain, sumPlain := 0.0, 0.0, 0.0
			const trials = 50
			for range trials {
				nodes := names(rng, tt.nodes)
				worst = max(worst, busiest(t, ringOf(Config{Shards: tt.shards}, nodes)))
				plain := busiest(t, ringOf(Config{Shards: tt.shards, Load: float64(tt.shards)}, nodes))
				worstPlain = max(worstPlain, plain)
				sumPlain += plain
			}
			t.Logf("bounded: worst busiest/mean %.3f; unbounded: mean %.2f, worst %.2f (over %d name sets)",
				worst, sumPlain/trials, worstPlain, trials)
			require.LessOrEqual(t, worst, tt.limit)
		})
	}
}

// Every process must compute the same assignment from the same members,
// whatever order it saw them join and leave in.
func TestRingDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, shards := range []int{DefaultShards, 256} {
		nodes := names(rng, 8)
		want := ringOf(Config{Shards: shards}, nodes).Assignments()
		for range 20 {
			shuffled := slices.Clone(nodes)
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			r := ringOf(Config{Shards: shards}, shuffled)
			require.Equal(t, want, r.Assignments())

			// A detour through other members must leave no trace.
			extra := names(rng, 3)
			for _, n := range extra {
				r.Add(n)
			}
			r.Remove(shuffled[0])
			for _, n := range extra {
				r.Remove(n)
			}
			r.Add(shuffled[0])
			require.Equal(t, want, r.Assignments())
		}
	}
}

func TestRingMembershipEdges(t *testing.T) {
	r := New(Config{})
	require.Equal(t, "", r.Owner(0), "empty ring")
	require.Empty(t, r.Assignments())
	require.Empty(t, r.Nodes())

	r.Remove("ghost")
	require.Empty(t, r.Nodes(), "removing an unknown node")

	r.Add("a")
	r.Add("a")
	require.Equal(t, []string{"a"}, r.Nodes(), "adding twice")
	for s := range r.Shards() {
		require.Equal(t, "a", r.Owner(s))
	}

	r.Add("b")
	before := r.Assignments()
	r.Remove("ghost")
	r.Add("b")
	require.Equal(t, before, r.Assignments(), "no-op changes must not reshuffle")

	r.Remove("a")
	r.Remove("b")
	require.Equal(t, "", r.Owner(DefaultShards-1), "emptied ring")

	require.Panics(t, func() { r.Owner(-1) })
	require.Panics(t, func() { r.Owner(DefaultShards) })
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero takes defaults", Config{}, true},
		{"256 shards", Config{Shards: 256}, true},
		{"load exactly 1", Config{Load: 1}, true},
		{"too many shards", Config{Shards: MaxShards + 1}, false},
		{"negative shards", Config{Shards: -1}, false},
		{"load below 1", Config{Load: 0.9}, false},
		{"negative virtual nodes", Config{VirtualNodes: -5}, false},
		{"too many virtual nodes", Config{VirtualNodes: maxVirtualNodes + 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if tt.ok {
				require.NoError(t, err)
				require.NotPanics(t, func() { New(tt.cfg) })
				return
			}
			require.Error(t, err)
			require.Panics(t, func() { New(tt.cfg) })
		})
	}
}

// Load 1 leaves no slack at all: every node must get exactly its share.
func TestRingLoadOneIsExact(t *testing.T) {
	r := ringOf(Config{Load: 1, Shards: 60}, names(rand.New(rand.NewPCG(5, 6)), 6))
	for _, shards := range r.Assignments() {
		require.Len(t, shards, 10)
	}
}

// Run with -race: lookups from many goroutines while membership changes.
func TestRingConcurrentUse(t *testing.T) {
	r := ringOf(Config{}, []string{"a", "b", "c"})
	var wg sync.WaitGroup
	var orphans atomic.Int64 // require must not be called off the test goroutine
	for range 8 {
		wg.Go(func() {
			for i := range 2000 {
				if r.Owner(i%r.Shards()) == "" {
					orphans.Add(1)
				}
				if i%100 == 0 {
					_ = r.Assignments()
					_ = r.Nodes()
				}
			}
		})
	}
	for i := range 50 {
		n := fmt.Sprintf("x%d", i%5)
		r.Add(n)
		r.Remove(n)
	}
	wg.Wait()
	require.Zero(t, orphans.Load(), "a shard had no owner while a, b and c stayed")
}
