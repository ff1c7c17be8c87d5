package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/testenv"
)

// rolloutCluster starts one of each service but the executor, then two
// executors reporting v1 and two reporting v2; slowV2 makes every v2
// handler take 1.2 times as long. It returns the reaper (whose guard
// drives the rollout) and the executors by name.
func rolloutCluster(t *testing.T, slowV2 bool) (*cluster, *proc, map[string]*proc) {
	c := newCluster(t)
	c.service(t, "submitter", "sub-1")
	c.service(t, "timer", "timer-1")
	c.service(t, "dispatcher", "disp-1")
	reaper := c.service(t, "reaper", "reaper-1")
	execs := map[string]*proc{}
	for _, n := range []string{"v1-a", "v1-b"} {
		execs[n] = c.service(t, "executor", n, "--version-label", "v1")
	}
	var env []string
	if slowV2 {
		env = []string{"AX_FAULT_SLOWER=1.2"}
	}
	for _, n := range []string{"v2-a", "v2-b"} {
		execs[n] = c.serviceEnv(t, env, "executor", n, "--version-label", "v2")
	}
	testenv.Eventually(t, 15*time.Second, "four executors in GET /v1/nodes", func() bool {
		nodes, err := c.api.ListNodes(context.Background())
		require.NoError(t, err)
		versions := map[string]int{}
		for _, n := range nodes.Nodes {
			if n.Alive {
				versions[n.Version]++
			}
		}
		return versions["v1"] == 2 && versions["v2"] == 2
	})
	return c, reaper, execs
}

// feed submits ax.sleep tasks of ms, one biz_key each, in bursts every
// 200 ms until stop is closed; it returns how many it submitted.
func (c *cluster) feed(t *testing.T, prefix string, ms int, burst int, stop <-chan struct{}) func() int {
	var wg sync.WaitGroup
	n := 0
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			for range burst {
				_, err := c.api.Submit(context.Background(), contracts.SubmitRequest{Type: "ax.sleep",
					BizKey: fmt.Sprintf("%s-%d", prefix, n), Payload: []byte(fmt.Sprintf(`{"ms":%d}`, ms))})
				if err != nil {
					t.Errorf("submit: %v", err)
					return
				}
				n++
			}
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	return func() int { wg.Wait(); return n }
}

// requireOneVersionPerTask checks every task ran exactly once, SUCCESS,
// on an executor of the version stored with it, and returns how many ran
// on each version.
func (c *cluster) requireOneVersionPerTask(t *testing.T, n int) map[string]int {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, "every task SUCCESS", func() bool {
		return c.count(t, "status = 'SUCCESS'") == n
	})
	require.Equal(t, n, c.count(t, "1 = 1"))
	var twice int
	require.NoError(t, c.db.QueryRow(`SELECT COUNT(*) FROM (SELECT task_id FROM task_history WHERE to_status = 'RUNNING'
		GROUP BY task_id HAVING COUNT(*) > 1) x`).Scan(&twice))
	require.Zero(t, twice, "tasks that ran more than once")
	rows, err := c.db.Query(`SELECT t.exec_version, t.executor_addr, h.reason FROM tasks t
		JOIN task_history h ON h.task_id = t.id AND h.to_status = 'RUNNING'`)
	require.NoError(t, err)
	defer rows.Close()
	on := map[string]int{}
	for rows.Next() {
		var version, node, reason string
		require.NoError(t, rows.Scan(&version, &node, &reason))
		require.True(t, strings.HasPrefix(node, version+"-"), "task stored with %s ran on %s", version, node)
		require.Contains(t, reason, "(version "+version+")", "the history says the version")
		on[version]++
	}
	require.NoError(t, rows.Err())
	return on
}

// A canary 20 % slower than stable is rolled back by the guard within its
// window; every task still runs once, on one version.
func TestRolloutSlowCanaryRolledBack(t *testing.T) {
	c, reaper, _ := rolloutCluster(t, true)
	ctx := context.Background()
	_, err := c.api.StartRollout(ctx, "ax.sleep", contracts.RolloutRequest{Version: "v2", Steps: []int{50, 100},
		StepTime: "5m", Grace: "5s", Guard: contracts.RolloutGuard{Window: "1m", MinSamples: 30}})
	require.NoError(t, err)
	// A second rollout of the same type while this one runs: refused.
	_, err = c.api.StartRollout(ctx, "ax.sleep", contracts.RolloutRequest{Version: "v3"})
	require.ErrorContains(t, err, "already has a rollout")

	stop := make(chan struct{})
	submitted := c.feed(t, "key", 200, 20, stop)
	ro := c.awaitRollout(t, contracts.RolloutRolledBack)
	close(stop)
	n := submitted()
	t.Logf("rolled back after %d submissions: %s (canary p99 %d ms, stable %d ms)", n, ro.Log[0].Reason, ro.Canary.P99Ms, ro.Stable.P99Ms)
	require.Equal(t, 0, ro.Percent)
	require.Equal(t, "rollback", ro.Log[0].Action)
	require.Contains(t, ro.Log[0].Reason, "guard: canary p99")
	require.Contains(t, ro.Log[0].Figures, `"verdict":"breach"`)
	require.Equal(t, 1.0, metric(t, reaper.addr, "ax_rollout_rollbacks_total", `type="ax.sleep"`, `trigger="guard"`))

	on := c.requireOneVersionPerTask(t, n)
	require.Positive(t, on["v2"])
	require.Positive(t, on["v1"])
	// After the rollback (and the second routing takes to hear of it) no
	// new task goes to v2.
	time.Sleep(time.Until(ro.Log[0].At.Add(routingLag)))
	late := c.feed(t, "late", 10, 20, closed())()
	c.requireOneVersionPerTask(t, n+late)
	require.Zero(t, c.count(t, "exec_version = 'v2' AND biz_key LIKE 'late-%'"), "tasks submitted after the rollback that ran on v2")
}

// awaitRollout waits for ax.sleep's rollout to end in state, failing at
// once if it ends otherwise.
func (c *cluster) awaitRollout(t *testing.T, state string) *contracts.Rollout {
	t.Helper()
	var ro *contracts.Rollout
	testenv.Eventually(t, 120*time.Second, "the guard ends the rollout "+state, func() bool {
		var err error
		ro, err = c.api.GetRollout(context.Background(), "ax.sleep")
		require.NoError(t, err)
		require.True(t, ro.State == state || ro.State == contracts.RolloutRunning, "rollout ended %s: %+v", ro.State, ro.Log)
		return ro.State == state
	})
	return ro
}

// routingLag is how long a rollout's move takes to reach routing: the
// dispatcher reads type settings through a one-second cache.
const routingLag = 2 * time.Second

func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// A canary as fast as stable is promoted through every step to 100 %; new
// tasks then all run on it.
func TestRolloutEqualCanaryPromoted(t *testing.T) {
	c, _, _ := rolloutCluster(t, false)
	ctx := context.Background()
	// The p99 threshold is looser than the default: two equal versions on
	// a loaded machine differ by more than 10 % at the p99 of a few dozen
	// runs by chance alone (docs/rollout.md).
	worse := 0.5
	_, err := c.api.StartRollout(ctx, "ax.sleep", contracts.RolloutRequest{Version: "v2", Steps: []int{20, 60, 100},
		StepTime: "2s", Grace: "5s", Guard: contracts.RolloutGuard{Window: "20s", MinSamples: 10, MaxP99Worse: &worse}})
	require.NoError(t, err)
	stop := make(chan struct{})
	submitted := c.feed(t, "key", 50, 15, stop)
	ro := c.awaitRollout(t, contracts.RolloutPromoted)
	close(stop)
	n := submitted()
	var moves []string
	for i := len(ro.Log) - 1; i >= 0; i-- {
		moves = append(moves, fmt.Sprintf("%s %d->%d", ro.Log[i].Action, ro.Log[i].FromPercent, ro.Log[i].ToPercent))
	}
	require.Equal(t, []string{"start 0->20", "advance 20->60", "advance 60->100", "promote 100->100"}, moves)
	require.Equal(t, 100, ro.Percent)
	c.requireOneVersionPerTask(t, n)

	time.Sleep(time.Until(ro.Log[0].At.Add(routingLag)))
	late := c.feed(t, "late", 10, 20, closed())()
	on := c.requireOneVersionPerTask(t, n+late)
	require.Zero(t, c.count(t, "exec_version = 'v1' AND biz_key LIKE 'late-%'"), "tasks submitted after the promotion that ran on v1")
	t.Logf("promoted after %d tasks; %v", n, on)
}

// A canary executor killed mid-rollout: its tasks are recovered on the
// other canary executor, never on stable. With both canary executors gone
// new canary tasks wait out the grace, then fall back to stable, recorded
// in their history; none is lost.
func TestRolloutKilledCanaryExecutor(t *testing.T) {
	c, _, execs := rolloutCluster(t, false)
	ctx := context.Background()
	// The guard never judges here (too few runs): only routing is tested.
	_, err := c.api.StartRollout(ctx, "ax.sleep", contracts.RolloutRequest{Version: "v2", Steps: []int{50},
		StepTime: "1h", Grace: "3s", Guard: contracts.RolloutGuard{MinSamples: 100000}})
	require.NoError(t, err)
	const n = 40
	for i := range n {
		_, err := c.api.Submit(ctx, contracts.SubmitRequest{Type: "ax.sleep", BizKey: fmt.Sprintf("long-%d", i),
			Payload: []byte(`{"ms":4000}`), Timeout: "1m"})
		require.NoError(t, err)
	}
	testenv.Eventually(t, 30*time.Second, "every task running", func() bool {
		return c.count(t, "status = 'RUNNING'") == n
	})
	execs["v2-a"].kill9(t)
	victims := c.count(t, "status = 'RUNNING' AND executor_addr = 'v2-a'")
	require.Positive(t, victims)
	testenv.Eventually(t, 60*time.Second, "every task SUCCESS", func() bool {
		return c.count(t, "status = 'SUCCESS'") == n
	})
	// Each task's claims were all of one version: the dead node's tasks
	// ran again on the other v2 node.
	var mixed, movedToB int
	require.NoError(t, c.db.QueryRow(`SELECT COUNT(*) FROM (SELECT task_id FROM task_history WHERE to_status = 'RUNNING'
		GROUP BY task_id HAVING COUNT(DISTINCT SUBSTRING_INDEX(reason, '(version ', -1)) > 1) x`).Scan(&mixed))
	require.Zero(t, mixed, "tasks that ran on two versions")
	for _, id := range c.ids(t, "executor_addr = 'v2-b'") {
		task, err := c.api.Get(ctx, strconv.FormatInt(id, 10))
		require.NoError(t, err)
		require.Equal(t, "v2", task.Version, "GET /v1/tasks/{id} shows the version")
	}
	require.NoError(t, c.db.QueryRow(`SELECT COUNT(DISTINCT h.task_id) FROM task_history h JOIN task_history h2
		ON h2.task_id = h.task_id AND h2.to_status = 'RUNNING' AND h2.reason LIKE 'claimed by v2-b%'
		WHERE h.to_status = 'RUNNING' AND h.reason LIKE 'claimed by v2-a%'`).Scan(&movedToB))
	require.Equal(t, victims, movedToB, "every task of the killed v2 node ran again on the other v2 node")

	// No canary executor left: canary tasks wait the grace, then fall back.
	execs["v2-b"].kill9(t)
	testenv.Eventually(t, 30*time.Second, "v2 gone from routing", func() bool {
		nodes, err := c.api.ListNodes(ctx)
		require.NoError(t, err)
		for _, nd := range nodes.Nodes {
			if nd.Version == "v2" && nd.Alive {
				return false
			}
		}
		return true
	})
	late := c.feed(t, "late", 10, 20, closed())()
	testenv.Eventually(t, 60*time.Second, "every late task SUCCESS", func() bool {
		return c.count(t, "status = 'SUCCESS' AND biz_key LIKE 'late-%'") == late
	})
	require.Zero(t, c.count(t, "exec_version = 'v2' AND biz_key LIKE 'late-%'"))
	var fellBack int
	require.NoError(t, c.db.QueryRow(`SELECT COUNT(*) FROM task_history WHERE to_status = 'RUNNING'
		AND reason LIKE '%fell back from v2%'`).Scan(&fellBack))
	require.Positive(t, fellBack, "the canary's share fell back to stable, recorded")
	t.Logf("%d tasks of the killed canary node recovered on the other; %d of %d later tasks fell back to stable", victims, fellBack, late)
}

// 1,000 business keys, each with a task of two types in rollout at 30 %:
// every key's tasks ran on one version, and the canary's share is within
// ±3 points of the percent.
func TestRolloutThousandKeysStickToOneVersion(t *testing.T) {
	c, _, _ := rolloutCluster(t, false)
	ctx := context.Background()
	for _, typ := range []string{"ax.noop", "ax.sleep"} {
		_, err := c.api.StartRollout(ctx, typ, contracts.RolloutRequest{Version: "v2", Steps: []int{30},
			StepTime: "1h", Guard: contracts.RolloutGuard{MinSamples: 100000}})
		require.NoError(t, err)
	}
	const keys = 1000
	for start := 0; start < keys; start += 250 {
		var req contracts.BatchRequest
		for i := start; i < start+250; i++ {
			for _, typ := range []string{"ax.noop", "ax.sleep"} {
				req.Tasks = append(req.Tasks, contracts.SubmitRequest{Type: typ, BizKey: fmt.Sprintf("customer-%d", i)})
			}
		}
		res, err := c.api.SubmitBatch(ctx, req)
		require.NoError(t, err)
		for _, r := range res.Results {
			require.Nil(t, r.Error, "%+v", r.Error)
		}
	}
	on := c.requireOneVersionPerTask(t, 2*keys)
	var split int
	require.NoError(t, c.db.QueryRow(`SELECT COUNT(*) FROM (SELECT biz_key FROM tasks GROUP BY biz_key
		HAVING COUNT(DISTINCT exec_version) > 1) x`).Scan(&split))
	require.Zero(t, split, "keys whose tasks ran on both versions")
	share := float64(on["v2"]) / float64(2*keys) * 100
	t.Logf("canary share at 30 %%: %.1f %% (%v)", share, on)
	require.InDelta(t, 30, share, 3)
}

// Retries keep the version of the first attempt: flaky tasks that fail
// twice run all three attempts on one version, through the timer's
// backoffs, whatever the percent does in between.
func TestRolloutRetriesKeepTheirVersion(t *testing.T) {
	c, _, _ := rolloutCluster(t, false)
	ctx := context.Background()
	_, err := c.api.StartRollout(ctx, "ax.flaky", contracts.RolloutRequest{Version: "v2", Steps: []int{50, 100},
		StepTime: "1h", Guard: contracts.RolloutGuard{MinSamples: 100000}})
	require.NoError(t, err)
	const n = 40
	for i := range n {
		_, err := c.api.Submit(ctx, contracts.SubmitRequest{Type: "ax.flaky", BizKey: fmt.Sprintf("retry-%d", i),
			Payload: []byte(`{"fail_times":2}`)})
		require.NoError(t, err)
	}
	// While the first attempts back off, the canary goes to 100 %: the
	// retries of stable tasks must stay on stable all the same.
	testenv.Eventually(t, 30*time.Second, "every first attempt failed", func() bool {
		return c.count(t, "attempt >= 1 AND status <> 'RUNNING'") == n
	})
	_, err = c.api.MoveRollout(ctx, "ax.flaky", "promote", "retries must not follow")
	require.NoError(t, err)
	testenv.Eventually(t, 60*time.Second, "every task SUCCESS on its third attempt", func() bool {
		return c.count(t, "status = 'SUCCESS' AND attempt = 3") == n
	})
	var mixed int
	require.NoError(t, c.db.QueryRow(`SELECT COUNT(*) FROM (SELECT task_id FROM task_history WHERE to_status = 'RUNNING'
		GROUP BY task_id HAVING COUNT(DISTINCT SUBSTRING_INDEX(reason, '(version ', -1)) > 1) x`).Scan(&mixed))
	require.Zero(t, mixed, "tasks whose attempts ran on two versions")
	require.Positive(t, c.count(t, "exec_version = 'v1'"), "stable tasks kept stable through a promotion")
	require.Positive(t, c.count(t, "exec_version = 'v2'"))
}
