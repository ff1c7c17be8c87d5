package route

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/membership"
	"github.com/axsched/ax/services/internal/ring"
	"github.com/axsched/ax/services/internal/testenv"
)

// A router that knows no live node re-reads the registry at
// EmptyRefreshInterval, so the node a process starts (its first heartbeat
// lands after the router's first read) is routed to within that, not a
// whole RefreshInterval later; once it knows a node it goes back to its
// slow pace. Here the slow pace is an hour: only the fast one can find the
// node, and after that a second node joining goes unnoticed.
func TestARouterThatKnowsNoNodeLooksAgainSoon(t *testing.T) {
	rdb, k := testenv.Redis(t)
	r := NewRouter(rdb, k.Nodes(), clock.System{}, time.Second, ring.Config{Shards: 16}, testenv.Logger(t))
	r.every, r.emptyEvery = time.Hour, 20*time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// Let Run's first read find the registry empty.
	time.Sleep(100 * time.Millisecond)
	require.True(t, r.Table().empty(), "no node has beaten yet")
	beat := func(name string) {
		require.NoError(t, membership.Beat(context.Background(), rdb, k.Nodes(), contracts.Node{
			Name: name, Types: []string{"t"}, LastHeartbeat: time.Now().UTC()}))
	}
	beat("n1")
	testenv.Eventually(t, 10*time.Second, "the router finds the node", func() bool {
		owner, ok := r.Table().Owner("t", 1)
		return ok && owner == "n1"
	})

	beat("n2")
	time.Sleep(300 * time.Millisecond)
	for id := int64(1); id <= 64; id++ {
		owner, _ := r.Table().Owner("t", id)
		require.Equal(t, "n1", owner, "a router that knows a node waits its RefreshInterval before it reads n2")
	}
}
