package main

// Cluster tests with real processes: graceful scale-in of an executor, and
// every service running as two replicas. Like the other process tests they
// are skipped by `go test -short` (see binaries) and run by `make test`.

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/testenv"
)

// metric sums the samples of the metric name served on addr's /metrics
// whose labels contain every one of match (e.g. `type="ax.noop"`).
func metric(t *testing.T, addr, name string, match ...string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		labels, value, _ := strings.Cut(line, "} ")
		if !strings.Contains(line, "{") {
			labels, value, _ = strings.Cut(line, " ")
		}
		ok := true
		for _, m := range match {
			ok = ok && strings.Contains(labels, m)
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		require.NoError(t, err, "sample %q", line)
		sum += v
	}
	require.NoError(t, sc.Err())
	return sum
}

// nodeNames lists the executors GET /v1/nodes reports, with liveness.
func nodeNames(t *testing.T, api *client.Client) map[string]bool {
	t.Helper()
	l, err := api.ListNodes(context.Background())
	require.NoError(t, err)
	out := map[string]bool{}
	for _, n := range l.Nodes {
		out[n.Name] = n.Alive
	}
	return out
}

// deliveries is how many times JetStream delivered the messages of a task
// type's lanes, first deliveries and redeliveries (Naks, ack timeouts), over
// the consumers that still exist (a node that left deleted its own).
func deliveries(t *testing.T, natsURL, taskType string) uint64 {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, events.StreamWork)
	require.NoError(t, err)
	var total uint64
	names := stream.ConsumerNames(ctx)
	for name := range names.Name() {
		if !strings.HasPrefix(name, "exec_"+strings.ReplaceAll(taskType, ".", "_")+"_") {
			continue
		}
		c, err := js.Consumer(ctx, events.StreamWork, name)
		require.NoError(t, err)
		info, err := c.Info(ctx)
		require.NoError(t, err)
		total += info.Delivered.Consumer
	}
	require.NoError(t, names.Err())
	return total
}

// shardsOf returns the shards of taskType each live node owns, per GET
// /v1/nodes.
func shardsOf(t *testing.T, api *client.Client, taskType string) map[string][]int {
	t.Helper()
	l, err := api.ListNodes(context.Background())
	require.NoError(t, err)
	out := map[string][]int{}
	for _, n := range l.Nodes {
		if n.Alive {
			out[n.Name] = n.Shards[taskType]
		}
	}
	return out
}

// historyRow is one task_history row as the tests read it.
type historyRow struct {
	taskID   int64
	from, to string
	reason   string
	actor    string
}

// histories reads the whole history table, grouped by task in id order.
func (c *cluster) histories(t *testing.T) map[int64][]historyRow {
	t.Helper()
	rows, err := c.db.Query(`SELECT task_id, from_status, to_status, reason, actor FROM task_history ORDER BY task_id, id`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[int64][]historyRow{}
	for rows.Next() {
		var r historyRow
		require.NoError(t, rows.Scan(&r.taskID, &r.from, &r.to, &r.reason, &r.actor))
		out[r.taskID] = append(out[r.taskID], r)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestGracefulScaleIn: two executors work through 500 ax.sleep tasks; one
// gets SIGTERM while many tasks run and many wait. It leaves the membership
// registry at once (GET /v1/nodes stops listing it while it still drains),
// hands back the messages it fetched, lets short tasks finish, hands the
// long ones back to READY at its 3 s shutdown timeout — not after their
// 301 s leases — and exits 0. The survivor finishes everything: each task
// succeeds exactly once, and a task that ran twice has exactly one hand-back
// by the leaving node between its runs.
func TestGracefulScaleIn(t *testing.T) {
	c := newCluster(t)
	c.service(t, "submitter", "sub-1")
	c.service(t, "timer", "timer-1")
	disp := c.service(t, "dispatcher", "disp-1")
	c.service(t, "reaper", "reaper-1")
	leaving := c.service(t, "executor", "exec-a", "--shutdown-timeout", "3s")
	c.service(t, "executor", "exec-b")
	testenv.Eventually(t, 20*time.Second, "both executors registered", func() bool {
		nodes := nodeNames(t, c.api)
		return nodes["exec-a"] && nodes["exec-b"]
	})

	const n = 500
	long := submitMixedSleeps(t, c, n)
	testenv.Eventually(t, 120*time.Second, "long tasks running on exec-a, work done and work queued", func() bool {
		return c.count(t, "status = 'SUCCESS'") >= 50 && c.count(t, "status = 'READY'") >= 100 && c.longRunningOn(t, "exec-a", long) >= 1
	})
	running := c.count(t, "status = 'RUNNING' AND executor_addr = 'exec-a'")
	longOnA := c.longRunningOn(t, "exec-a", long)
	queued := c.count(t, "status = 'READY'")

	before := shardsOf(t, c.api, "ax.sleep")
	require.NotEmpty(t, before["exec-a"], "exec-a owns shards of ax.sleep")
	require.NotEmpty(t, before["exec-b"], "exec-b owns shards of ax.sleep")
	require.Len(t, append(slices.Clone(before["exec-a"]), before["exec-b"]...), 64, "the two nodes share the 64 shards")

	termed, left, exited := terminateExecutor(t, c, leaving, "exec-b")
	// What exec-a did not finish, exec-b must.
	unfinished := c.ids(t, "status <> 'SUCCESS'")

	testenv.Eventually(t, 150*time.Second, "all tasks SUCCESS", func() bool {
		return c.count(t, "status = 'SUCCESS'") == n
	})
	for _, id := range unfinished {
		require.Equal(t, 1, c.count(t, "id = ? AND executor_addr = 'exec-b'", id), "task %d unfinished at exec-a's exit", id)
	}
	after := shardsOf(t, c.api, "ax.sleep")
	require.NotContains(t, after, "exec-a")
	require.Len(t, after["exec-b"], 64, "exec-a's shards moved to the survivor")

	handedBack := c.requireHandedBackOnlyBy(t, "exec-a", long)
	require.Positive(t, handedBack, "the long tasks running on exec-a at its timeout were handed back")
	// Deliveries beyond one per dispatched message are redeliveries.
	redelivered := int64(deliveries(t, c.natsURL, "ax.sleep")) - int64(metric(t, disp.addr, "ax_dispatcher_dispatched_total", `type="ax.sleep"`))

	t.Logf("SIGTERM with %d tasks running on exec-a (%d of them 8 s long) and %d READY: exec-a left GET /v1/nodes after %s "+
		"and exited 0 after %s (shutdown timeout 3 s); %d RUNNING tasks handed back to READY at the timeout; "+
		"%d JetStream redeliveries (fetched messages handed back with Nak, or claims retried); "+
		"%d tasks unfinished at exit, all finished by exec-b; all %d SUCCESS %s after SIGTERM",
		running, longOnA, queued, left.Round(time.Millisecond), exited.Round(10*time.Millisecond), handedBack,
		redelivered, len(unfinished), n, time.Since(termed).Round(100*time.Millisecond))
}

// submitMixedSleeps submits n ax.sleep tasks in one batch and returns the
// IDs of the long ones. Every tenth task sleeps 8 s, longer than exec-a's
// shutdown timeout; the rest sleep 1 s. The type's 5 min timeout makes each
// lease 301 s, so only a hand-back, not a lease expiry, can move a task in
// time.
func submitMixedSleeps(t *testing.T, c *cluster, n int) (long map[string]bool) {
	t.Helper()
	req := contracts.BatchRequest{Tasks: make([]contracts.SubmitRequest, n)}
	for i := range req.Tasks {
		ms := 1000
		if i%10 == 0 {
			ms = 8000
		}
		// All three lanes, so the fetchers hold heads they have not
		// claimed yet, which a leaving node must hand back.
		req.Tasks[i] = contracts.SubmitRequest{Type: "ax.sleep", Priority: string(contracts.Priorities[i%3]),
			Payload: []byte(fmt.Sprintf(`{"ms":%d}`, ms))}
	}
	resp, err := c.api.SubmitBatch(context.Background(), req)
	require.NoError(t, err)
	require.Equal(t, n, resp.Created)
	long = map[string]bool{}
	for i, r := range resp.Results {
		if i%10 == 0 {
			long[r.Task.ID] = true
		}
	}
	return long
}

// longRunningOn counts the long tasks RUNNING on node.
func (c *cluster) longRunningOn(t *testing.T, node string, long map[string]bool) int {
	t.Helper()
	k := 0
	for _, id := range c.ids(t, "status = 'RUNNING' AND executor_addr = ?", node) {
		if long[strconv.FormatInt(id, 10)] {
			k++
		}
	}
	return k
}

// terminateExecutor sends SIGTERM to an executor and waits for it to leave
// GET /v1/nodes (while survivor stays) and then to exit 0, which it must do
// in that order. It returns when the signal went and how long after it the
// executor left and exited.
func terminateExecutor(t *testing.T, c *cluster, leaving *proc, survivor string) (termed time.Time, left, exited time.Duration) {
	t.Helper()
	require.NoError(t, leaving.cmd.Process.Signal(syscall.SIGTERM))
	termed = time.Now()
	testenv.Eventually(t, 10*time.Second, leaving.name+" gone from GET /v1/nodes", func() bool {
		nodes := nodeNames(t, c.api)
		if _, ok := nodes[leaving.name]; ok {
			return false
		}
		require.True(t, nodes[survivor], "the survivor stays listed and alive")
		left = time.Since(termed)
		return true
	})
	var exitErr error
	select {
	case exitErr = <-leaving.done:
		leaving.done <- exitErr
	case <-time.After(60 * time.Second):
		t.Fatalf("%s did not exit within 60 s of SIGTERM", leaving.name)
	}
	exited = time.Since(termed)
	require.NoError(t, exitErr, "%s exit status", leaving.name)
	require.Less(t, left, exited, "%s left the registry before it finished draining", leaving.name)
	return termed, left, exited
}

// requireHandedBackOnlyBy checks every task's history: it succeeded once,
// every run but the last ended in a hand-back by the leaving node, and only
// long tasks were handed back. It returns the number of hand-backs.
func (c *cluster) requireHandedBackOnlyBy(t *testing.T, node string, long map[string]bool) int {
	t.Helper()
	handedBack := 0
	for id, h := range c.histories(t) {
		runs, successes, backs := 0, 0, 0
		var seq []string
		for _, r := range h {
			if r.from == r.to {
				continue // a refused late write, recorded; not a transfer
			}
			seq = append(seq, r.to)
			switch {
			case r.to == "RUNNING":
				runs++
			case r.to == "SUCCESS":
				successes++
			case r.from == "RUNNING" && r.to == "READY":
				backs++
				require.Equal(t, node+" shut down before the task finished", r.reason, "task %d: only the leaving node hands tasks back", id)
				require.Equal(t, "executor@"+node, r.actor)
			}
		}
		require.Equal(t, 1, successes, "task %d: %v", id, seq)
		require.Equal(t, runs-1, backs, "task %d ran %d times with %d hand-backs: %v", id, runs, backs, seq)
		require.Equal(t, "SUCCESS", seq[len(seq)-1], "task %d: %v", id, seq)
		if runs > 1 {
			require.True(t, long[strconv.FormatInt(id, 10)], "task %d: only tasks longer than the shutdown timeout are handed back", id)
		}
		handedBack += backs
	}
	return handedBack
}

func (c *cluster) ids(t *testing.T, where string, args ...any) []int64 {
	t.Helper()
	rows, err := c.db.Query("SELECT id FROM tasks WHERE "+where, args...)
	require.NoError(t, err)
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		require.NoError(t, rows.Scan(&id))
		out = append(out, id)
	}
	require.NoError(t, rows.Err())
	return out
}

// TestEveryServiceReplicated runs two replicas of each of the five services
// as separate processes (one NATS server, one database, one Redis prefix)
// and submits 10,000 ax.noop tasks in batches of 1,000, alternating between
// the two submitters. With no faults, every task succeeds exactly once: the
// executors' own counters of handler runs add up to 10,000, and every
// task's history is exactly READY, RUNNING, SUCCESS. Duplicate due commands
// and dispatches (the reconciler re-drives tasks that wait in a backlog) are
// absorbed by the claim before a handler runs and leave no history.
func TestEveryServiceReplicated(t *testing.T) {
	c := newCluster(t)
	byService := map[string][]*proc{}
	for _, svc := range []string{"submitter", "timer", "dispatcher", "executor", "reaper"} {
		for i := 1; i <= 2; i++ {
			extra := []string{}
			if svc == "submitter" {
				extra = append(extra, "--node-id", strconv.Itoa(i)) // distinct snowflake nodes
			}
			byService[svc] = append(byService[svc], c.service(t, svc, fmt.Sprintf("%s-%d", svc, i), extra...))
		}
	}
	testenv.Eventually(t, 20*time.Second, "both executors registered", func() bool {
		nodes := nodeNames(t, c.api)
		return nodes["executor-1"] && nodes["executor-2"]
	})

	const n, batch = 10_000, 1_000
	started := time.Now()
	for b := range n / batch {
		api := client.New(byService["submitter"][b%2].addr)
		req := contracts.BatchRequest{Tasks: make([]contracts.SubmitRequest, batch)}
		for i := range req.Tasks {
			req.Tasks[i] = contracts.SubmitRequest{Type: "ax.noop"}
		}
		resp, err := api.SubmitBatch(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, batch, resp.Created, "batch %d", b)
	}
	submitted := time.Since(started)
	// A generous bound for a stuck run, not a speed target: on this
	// 2-core machine the run took 40 s to 2 min depending on other load.
	testenv.Eventually(t, 6*time.Minute, "10,000 tasks SUCCESS", func() bool {
		return c.count(t, "status = 'SUCCESS'") == n
	})
	done := time.Since(started)

	// Handler runs as the executors counted them, whatever the outcome.
	runs := map[string]float64{}
	total := 0.0
	for _, p := range byService["executor"] {
		runs[p.name] = metric(t, p.addr, "ax_executor_runs_total", `type="ax.noop"`)
		total += runs[p.name]
	}
	require.Equal(t, float64(n), total, "handler runs of ax.noop over both executors: %v", runs)

	tasks, anomalies := c.historyAnomalies(t)
	require.Equal(t, n, tasks, "tasks with a history")
	require.Zero(t, anomalies, "tasks whose history is not exactly READY, RUNNING, SUCCESS")
	actors := testenv.Column[string](t, c.db, `SELECT DISTINCT actor FROM task_history ORDER BY actor`)
	require.Equal(t, []string{"executor@executor-1", "executor@executor-2", "submitter@submitter-1", "submitter@submitter-2"},
		actors, "both submitters created and both executors ran tasks; no other actor moved a task")

	// Work done by each replica, for the log: duplicates show as lost claims.
	share := func(svc, name string, match ...string) string {
		var parts []string
		for _, p := range byService[svc] {
			parts = append(parts, fmt.Sprintf("%s %.0f", p.name, metric(t, p.addr, name, match...)))
		}
		return strings.Join(parts, ", ")
	}
	// Dispatches come from the dispatchers (due commands) and from the
	// relay holding the lease (tasks due at once), in whatever process.
	dispatched := func() string {
		var parts []string
		for _, svc := range []string{"submitter", "timer", "dispatcher", "executor", "reaper"} {
			for _, p := range byService[svc] {
				if v := metric(t, p.addr, "ax_dispatcher_dispatched_total", `type="ax.noop"`); v > 0 {
					parts = append(parts, fmt.Sprintf("%s %.0f", p.name, v))
				}
			}
		}
		return strings.Join(parts, ", ")
	}
	t.Logf("%d ax.noop tasks over 2 replicas of each service: submitted in %s, all SUCCESS after %s (%.0f tasks/s end to end); "+
		"runs: %s; indexed: %s; re-driven by the reconciler: %s; due popped: %s; dispatched: %s; claims lost to duplicates: %s; reaper recoveries: %s",
		n, submitted.Round(10*time.Millisecond), done.Round(100*time.Millisecond), float64(n)/done.Seconds(),
		share("executor", "ax_executor_runs_total", `type="ax.noop"`),
		share("timer", "ax_timer_indexed_total"),
		share("timer", "ax_timer_reconciled_total"),
		share("timer", "ax_timer_due_total"),
		dispatched(),
		share("executor", "ax_executor_claims_lost_total", `type="ax.noop"`),
		share("reaper", "ax_reaper_recovered_total"))
}

// historyAnomalies counts the tasks with a history, and those whose
// history is not exactly READY, RUNNING, SUCCESS.
func (c *cluster) historyAnomalies(t *testing.T) (tasks, anomalies int) {
	t.Helper()
	require.NoError(t, c.db.QueryRow(`SELECT COUNT(*),
			COALESCE(SUM(runs <> 1 OR successes <> 1 OR rows_ <> 3 OR seq <> 'READY,RUNNING,SUCCESS'), 0)
		FROM (SELECT task_id, SUM(to_status = 'RUNNING') runs, SUM(to_status = 'SUCCESS') successes, COUNT(*) rows_,
			GROUP_CONCAT(to_status ORDER BY id) seq FROM task_history GROUP BY task_id) h`).Scan(&tasks, &anomalies))
	return tasks, anomalies
}

// relayHolder names the node whose relay holds the history lease ("" when
// nobody does).
func (c *cluster) relayHolder(t *testing.T) string {
	t.Helper()
	var holder string
	require.NoError(t, c.db.QueryRow(`SELECT holder FROM event_relay WHERE name = 'task_history' AND lease_until > NOW(3)`).Scan(&holder))
	node, _, _ := strings.Cut(holder, "/")
	return node
}

// TestKilledRelayHolderLosesNoTask: the relay holding the history lease
// publishes the events of every process's transfers and dispatches the
// tasks due at once with them (those of batches: a single submission is
// dispatched by its submitter). Its process is killed with SIGKILL while
// tasks are submitted, in batches of three, through another submitter;
// another process's relay takes the lease over when it lapses and
// publishes and dispatches again from the stored cursor, with no help from
// the reconciler. Every task runs once and succeeds, its history exactly
// READY, RUNNING, SUCCESS.
func TestKilledRelayHolderLosesNoTask(t *testing.T) {
	c := newCluster(t)
	holder := c.service(t, "submitter", "submitter-1", "--node-id", "1")
	testenv.Eventually(t, 10*time.Second, "submitter-1 holds the relay lease", func() bool {
		var n int
		require.NoError(t, c.db.QueryRow(`SELECT COUNT(*) FROM event_relay WHERE name = 'task_history' AND lease_until > NOW(3)`).Scan(&n))
		return n == 1 && c.relayHolder(t) == "submitter-1"
	})
	other := c.service(t, "submitter", "submitter-2", "--node-id", "2")
	// The reconciler would re-drive a task left undispatched for long
	// enough; it is given a minute, so what this test proves is the
	// relay's own takeover.
	timer := c.service(t, "timer", "timer-1", "--reconcile-grace", "1m")
	for _, svc := range []string{"dispatcher", "reaper"} {
		c.service(t, svc, svc+"-1")
	}
	executors := []*proc{c.service(t, "executor", "executor-1"), c.service(t, "executor", "executor-2")}
	require.Equal(t, "submitter-1", c.relayHolder(t), "the first relay keeps the lease")

	const n = 600
	created := make(chan int, 1)
	go func() {
		api, ok := client.New(other.addr), 0
		batch := contracts.BatchRequest{Tasks: []contracts.SubmitRequest{{Type: "ax.noop"}, {Type: "ax.noop"}, {Type: "ax.noop"}}}
		for range n / len(batch.Tasks) {
			res, err := api.SubmitBatch(context.Background(), batch)
			if err != nil {
				t.Errorf("submit: %v", err)
				break
			}
			for _, r := range res.Results {
				if r.Task != nil {
					ok++
				}
			}
		}
		created <- ok
	}()
	testenv.Eventually(t, time.Minute, "a third of the tasks submitted", func() bool {
		return c.count(t, "1=1") >= n/3
	})
	holder.kill9(t)
	require.Equal(t, n, <-created, "every submission through submitter-2 succeeded")

	// A bound for a stuck run, not a speed target: within it the reconciler
	// (a minute's grace) cannot have stepped in.
	testenv.Eventually(t, 45*time.Second, "every task SUCCESS", func() bool {
		return c.count(t, "status = 'SUCCESS'") == n
	})
	require.Zero(t, metric(t, timer.addr, "ax_timer_reconciled_total"), "no task needed the reconciler")
	require.NotEqual(t, "submitter-1", c.relayHolder(t), "another relay took the lease over")
	runs := 0.0
	for _, p := range executors {
		runs += metric(t, p.addr, "ax_executor_runs_total", `type="ax.noop"`)
	}
	require.Equal(t, float64(n), runs, "handler runs over both executors")
	tasks, anomalies := c.historyAnomalies(t)
	require.Equal(t, n, tasks, "tasks with a history")
	require.Zero(t, anomalies, "tasks whose history is not exactly READY, RUNNING, SUCCESS")
	t.Logf("relay holder killed after %d of %d submissions; the lease went to %s", n/3, n, c.relayHolder(t))
}

// TestKilledSubmitterLosesNoTask: a submitter dispatches the single
// submissions due at once it commits, right after each commit. It is
// killed with SIGKILL while eight clients submit through it, so some
// tasks are committed and never dispatched (killed between the commit and
// the send, or with their sends queued). Every committed task still runs
// exactly once and succeeds, its history exactly READY, RUNNING, SUCCESS:
// what the submitter did not send the timer's reconciler re-drives from
// MySQL (its grace shortened to a second here), and a dispatch the
// reconciler repeats loses its claim.
func TestKilledSubmitterLosesNoTask(t *testing.T) {
	c := newCluster(t)
	sub := c.service(t, "submitter", "submitter-1", "--node-id", "1")
	timer := c.service(t, "timer", "timer-1", "--reconcile-grace", "1s", "--reconcile-interval", "500ms")
	for _, svc := range []string{"dispatcher", "reaper"} {
		c.service(t, svc, svc+"-1")
	}
	exec := c.service(t, "executor", "executor-1")

	var (
		wg       sync.WaitGroup
		answered atomic.Int64
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			api := client.New(sub.addr)
			for range 150 {
				if _, err := api.Submit(context.Background(), contracts.SubmitRequest{Type: "ax.noop"}); err != nil {
					return // the submitter is gone
				}
				answered.Add(1)
			}
		}()
	}
	testenv.Eventually(t, time.Minute, "some tasks submitted", func() bool { return c.count(t, "1=1") >= 300 })
	sub.kill9(t)
	wg.Wait()
	committed := c.count(t, "1=1")
	require.GreaterOrEqual(t, committed, int(answered.Load()), "every answered submission was committed")
	require.Less(t, committed, 8*150, "the kill cut submissions short")

	// A bound for a stuck run, not a speed target.
	testenv.Eventually(t, 90*time.Second, "every committed task SUCCESS", func() bool {
		return c.count(t, "status = 'SUCCESS'") == committed
	})
	runs := metric(t, exec.addr, "ax_executor_runs_total", `type="ax.noop"`)
	require.Equal(t, float64(committed), runs, "one handler run per committed task")
	tasks, anomalies := c.historyAnomalies(t)
	require.Equal(t, committed, tasks, "tasks with a history")
	require.Zero(t, anomalies, "tasks whose history is not exactly READY, RUNNING, SUCCESS")
	t.Logf("submitter killed after %d answered submissions, %d committed; the reconciler re-drove %.0f",
		answered.Load(), committed, metric(t, timer.addr, "ax_timer_reconciled_total"))
}
