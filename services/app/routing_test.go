package app_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/app"
	"github.com/axsched/ax/services/internal/ring"
	"github.com/axsched/ax/services/internal/route"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestTasksRunOnTheirShardOwner: with three executors of a type alive, every
// task runs on the owner of its shard on the type's ring (256 shards here),
// as GET /v1/nodes shows it, and the three split the shards and the work.
func TestTasksRunOnTheirShardOwner(t *testing.T) {
	_, k := testenv.Redis(t)
	sys := startSystemWith(t, schedulerOnly, "127.0.0.1:6379", k.Prefix, func(c *app.Config) {
		c.Executor.HeartbeatInterval = 300 * time.Millisecond
		c.Shards = 256
	})
	nodes := []string{"exec-1", "exec-2", "exec-3"}
	for _, n := range nodes {
		sys.join(t, []app.Service{app.Executor}, func(c *app.Config) {
			c.Node = n
			c.Executor.HeartbeatInterval = 300 * time.Millisecond
		})
	}
	list := testenv.AwaitLiveExecutors(t, sys.api, 3, 20*time.Second)
	time.Sleep(2 * route.RefreshInterval) // the relays' and dispatcher's views catch up

	owned := map[int]string{}
	for _, n := range list.Nodes {
		require.NotEmpty(t, n.Shards["ax.noop"], "%s owns shards of ax.noop", n.Name)
		for _, s := range n.Shards["ax.noop"] {
			require.Empty(t, owned[s], "shard %d owned twice", s)
			owned[s] = n.Name
		}
	}
	require.Equal(t, 256, list.ShardCount)
	require.Len(t, owned, list.ShardCount)

	const n = 300
	ids := submitMany(t, sys.api, n, 8, contracts.SubmitRequest{Type: "ax.noop"})
	testenv.Eventually(t, 60*time.Second, "all tasks SUCCESS", func() bool {
		return sys.countStatus(t, contracts.StatusSuccess) == n
	})
	perNode := map[string]int{}
	for _, id := range ids {
		var ran string
		require.NoError(t, sys.db.QueryRow(`SELECT executor_addr FROM tasks WHERE id = ?`, id).Scan(&ran))
		i, err := strconv.ParseInt(id, 10, 64)
		require.NoError(t, err)
		want := owned[ring.Shard(i, list.ShardCount)]
		require.Equal(t, want, ran, "task %s (shard %d)", id, ring.Shard(i, list.ShardCount))
		perNode[ran]++
	}
	t.Logf("tasks per node: %v", perNode)
	for _, node := range nodes {
		require.Positive(t, perNode[node], "%s ran tasks", node)
	}
}
