package main

// Tests that run ax as real OS processes: the built binary, a standalone
// NATS server, real MySQL and Redis. They prove what in-process tests
// cannot: separate services cooperating only through NATS, Redis and MySQL,
// and recovery from a process killed with SIGKILL.

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
	"github.com/axsched/ax/services/executor"
	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/route"
	"github.com/axsched/ax/services/internal/testenv"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// binaries returns the directory holding ax and nats-server, built once per
// test binary unless AX_TEST_BIN_DIR names a directory that has them.
func binaries(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("multi-process test")
	}
	buildOnce.Do(func() {
		if d := os.Getenv("AX_TEST_BIN_DIR"); d != "" {
			binDir, buildErr = filepath.Abs(d)
			return
		}
		binDir, buildErr = os.MkdirTemp("", "ax-bin-")
		if buildErr != nil {
			return
		}
		for _, pkg := range []string{".", "github.com/nats-io/nats-server/v2"} {
			out, err := exec.Command("go", "build", "-o", binDir+"/", pkg).CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	require.NoError(t, buildErr)
	for _, b := range []string{"ax", "nats-server"} {
		_, err := os.Stat(filepath.Join(binDir, b))
		require.NoError(t, err, "binary %s missing in %s", b, binDir)
	}
	return binDir
}

type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan error
	// addr is the HTTP address of a service started with cluster.service.
	addr string
}

func start(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	return startEnv(t, name, bin, nil, args...)
}

// startEnv is start with more environment variables (NAME=value).
func startEnv(t *testing.T, name, bin string, env []string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(append(os.Environ(), "AX_LOG_LEVEL=info"), env...)
	require.NoError(t, cmd.Start(), "start %s", name)
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait(); f.Close() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			data, _ := os.ReadFile(logPath)
			if len(data) > 6000 {
				data = data[len(data)-6000:]
			}
			t.Logf("---- %s log (tail) ----\n%s", name, data)
		}
	})
	return p
}

// stop sends SIGTERM and requires a clean exit within timeout.
func (p *proc) stop(t *testing.T, timeout time.Duration) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-p.done:
		p.done <- err
		require.NoError(t, err, "%s exit status", p.name)
	case <-time.After(timeout):
		t.Fatalf("%s did not stop within %s of SIGTERM", p.name, timeout)
	}
}

func (p *proc) kill9(t *testing.T) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	err := <-p.done
	p.done <- err
}

type cluster struct {
	bin      string
	rdb      *redis.Client
	keys     keys.Keys
	dsn      string
	db       *sql.DB
	natsURL  string
	prefix   string
	api      *client.Client
	apiAddr  string
	commonFl []string
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	bin := binaries(t)
	dsn := testenv.MySQLDSN(t)
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	rdb, k := testenv.Redis(t)

	port := testenv.FreePort(t)
	start(t, "nats-server", filepath.Join(bin, "nats-server"), "-a", "127.0.0.1", "-p", strconv.Itoa(port),
		"-js", "-sd", filepath.Join(t.TempDir(), "js"))
	testenv.Eventually(t, 30*time.Second, "nats-server accepting connections", func() bool {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	c := &cluster{bin: filepath.Join(bin, "ax"), dsn: dsn, db: db, prefix: k.Prefix, rdb: rdb, keys: k,
		natsURL: fmt.Sprintf("nats://127.0.0.1:%d", port)}
	c.commonFl = []string{"--mysql-dsn", dsn, "--nats-url", c.natsURL, "--redis-prefix", c.prefix}

	out, err := exec.Command(c.bin, "migrate", "up", "--mysql-dsn", dsn).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "schema at version")
	return c
}

// service starts `ax <svc>` and waits for its /readyz.
func (c *cluster) service(t *testing.T, svc, node string, extra ...string) *proc {
	t.Helper()
	return c.serviceEnv(t, nil, svc, node, extra...)
}

// serviceEnv is service with extra environment variables (NAME=value).
func (c *cluster) serviceEnv(t *testing.T, env []string, svc, node string, extra ...string) *proc {
	t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	// Executors serve the demonstration types unless a test says otherwise.
	args := append([]string{svc, "--http", addr, "--node", node, "--builtins"}, c.commonFl...)
	args = append(args, extra...)
	p := startEnv(t, node, c.bin, env, args...)
	p.addr = addr
	waitReady(t, p, addr)
	if svc == "submitter" {
		c.apiAddr = addr
		c.api = client.New(addr)
	}
	return p
}

func (c *cluster) count(t *testing.T, where string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, c.db.QueryRow("SELECT COUNT(*) FROM tasks WHERE "+where, args...).Scan(&n))
	return n
}

func (c *cluster) submit(t *testing.T, n int, req contracts.SubmitRequest) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range ids {
		task, err := c.api.Submit(context.Background(), req)
		require.NoError(t, err)
		ids[i] = task.ID
	}
	return ids
}

func TestFiveProcessesRunTasks(t *testing.T) {
	c := newCluster(t)
	procs := []*proc{
		c.service(t, "submitter", "sub-1"),
		c.service(t, "timer", "timer-1"),
		c.service(t, "dispatcher", "disp-1"),
		c.service(t, "executor", "exec-1"),
		c.service(t, "reaper", "reaper-1"),
	}
	const n = 200
	c.submit(t, n, contracts.SubmitRequest{Type: "ax.noop"})
	testenv.Eventually(t, 60*time.Second, "200 tasks SUCCESS", func() bool {
		return c.count(t, "status = 'SUCCESS'") == n
	})
	var bad int
	require.NoError(t, c.db.QueryRow(`SELECT COUNT(*) FROM (SELECT task_id, GROUP_CONCAT(to_status ORDER BY id) s
		FROM task_history GROUP BY task_id) h WHERE s <> 'READY,RUNNING,SUCCESS'`).Scan(&bad))
	require.Zero(t, bad, "tasks with a history other than READY,RUNNING,SUCCESS")
	var actors int
	require.NoError(t, c.db.QueryRow(`SELECT COUNT(DISTINCT actor) FROM task_history`).Scan(&actors))
	require.Equal(t, 2, actors, "submitter and executor wrote the history")

	// Graceful stop: every process exits 0 on SIGTERM.
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop(t, 45*time.Second)
	}
}

func TestKilledExecutorsTasksRunElsewhere(t *testing.T) {
	c := newCluster(t)
	fast := []string{"--lock-ttl", "2s", "--renew-interval", "500ms", "--heartbeat-interval", "30s"}
	c.service(t, "submitter", "sub-1")
	c.service(t, "timer", "timer-1")
	c.service(t, "dispatcher", "disp-1")
	c.service(t, "reaper", "reaper-1", "--reap-interval", "500ms", "--reap-silence", "2s", "--heartbeat-interval", "30s")
	victim := c.service(t, "executor", "exec-a", fast...)

	const n = 20
	// The lease is never shorter than the timeout (+1 s): 9 s here. The
	// membership heartbeat is slowed down so that this test exercises the
	// lease path; the dead-node path has its own test.
	ids := c.submit(t, n, contracts.SubmitRequest{Type: "ax.sleep", Timeout: "8s", Payload: []byte(`{"ms":6000}`)})
	testenv.Eventually(t, 30*time.Second, "all tasks RUNNING on exec-a", func() bool {
		return c.count(t, "status = 'RUNNING' AND executor_addr = 'exec-a'") == n
	})
	// A task with a timeout of its own has its lease resized right after
	// its claim; killed in between, an executor leaves the type's length
	// (docs/executors.md), which the dead-node path recovers, not the lease
	// path this test is about. Kill once every lease is the task's own.
	testenv.Eventually(t, 10*time.Second, "every lease sized by its task's timeout", func() bool {
		for _, id := range ids {
			n, err := strconv.ParseInt(id, 10, 64)
			require.NoError(t, err)
			if ttl := c.rdb.PTTL(context.Background(), c.keys.Lock(n)).Val(); ttl <= 0 || ttl > 9*time.Second {
				return false
			}
		}
		return true
	})
	victim.kill9(t)
	killed := time.Now()
	c.service(t, "executor", "exec-b", fast...)

	testenv.Eventually(t, 60*time.Second, "all tasks SUCCESS", func() bool {
		return c.count(t, "status = 'SUCCESS'") == n
	})
	t.Logf("all %d tasks of the killed executor succeeded %s after SIGKILL", n, time.Since(killed).Round(100*time.Millisecond))
	require.Equal(t, n, c.count(t, "executor_addr = 'exec-b' AND attempt = 2"))
	for _, id := range ids {
		h, err := c.api.History(context.Background(), id)
		require.NoError(t, err)
		var seq []string
		for _, e := range h.History {
			seq = append(seq, string(e.To))
		}
		require.Equal(t, "READY RUNNING READY RUNNING SUCCESS", strings.Join(seq, " "), "task %s", id)
		require.Contains(t, h.History[2].Reason, "lease expired: executor exec-a")
		require.True(t, strings.HasPrefix(h.History[2].Actor, "reaper@"), h.History[2].Actor)
		require.Equal(t, "executor@exec-b", h.History[3].Actor)
	}
}

// TestFrozenExecutorIsFencedOff freezes an executor with SIGSTOP past its
// lease: the task is taken over and completed by another executor; when the
// first resumes, its late outcome is refused by the attempt fence, the
// history says so, and the task keeps the newer outcome.
func TestFrozenExecutorIsFencedOff(t *testing.T) {
	c := newCluster(t)
	fast := []string{"--lock-ttl", "1s", "--renew-interval", "300ms"}
	c.service(t, "submitter", "sub-1")
	c.service(t, "timer", "timer-1")
	c.service(t, "dispatcher", "disp-1")
	c.service(t, "reaper", "reaper-1", "--reap-interval", "300ms", "--reap-silence", "1s")
	frozen := c.service(t, "executor", "exec-a", fast...)

	ctx := context.Background()
	// Lease = max(--lock-ttl, timeout + 1 s) = 3 s.
	task, err := c.api.Submit(ctx, contracts.SubmitRequest{Type: "ax.sleep", Timeout: "2s", Payload: []byte(`{"ms":1500}`)})
	require.NoError(t, err)
	testenv.Eventually(t, 20*time.Second, "task RUNNING on exec-a", func() bool {
		return c.count(t, "id = ? AND status = 'RUNNING' AND executor_addr = 'exec-a'", task.ID) == 1
	})
	require.NoError(t, frozen.cmd.Process.Signal(syscall.SIGSTOP))
	c.service(t, "executor", "exec-b", fast...)
	testenv.Eventually(t, 30*time.Second, "task SUCCESS on exec-b", func() bool {
		return c.count(t, "id = ? AND status = 'SUCCESS' AND executor_addr = 'exec-b' AND attempt = 2", task.ID) == 1
	})

	require.NoError(t, frozen.cmd.Process.Signal(syscall.SIGCONT))
	var rejection contracts.HistoryEntry
	testenv.Eventually(t, 20*time.Second, "exec-a's late outcome refused and recorded", func() bool {
		h, err := c.api.History(ctx, task.ID)
		require.NoError(t, err)
		for _, e := range h.History {
			if strings.HasPrefix(e.Reason, "rejected RUNNING->") {
				rejection = e
				return true
			}
		}
		return false
	})
	require.Equal(t, "executor@exec-a", rejection.Actor)
	require.Contains(t, rejection.Reason, "from attempt 1")
	require.Contains(t, rejection.Reason, "at attempt 2")
	require.Equal(t, contracts.StatusSuccess, rejection.From)
	require.Equal(t, contracts.StatusSuccess, rejection.To)

	final, err := c.api.Get(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, contracts.StatusSuccess, final.Status)
	require.Equal(t, 2, final.Attempt)
	require.Equal(t, "exec-b", final.Executor)
	h, err := c.api.History(ctx, task.ID)
	require.NoError(t, err)
	var seq []string
	for _, e := range h.History {
		seq = append(seq, string(e.To))
	}
	require.Equal(t, "READY RUNNING READY RUNNING SUCCESS SUCCESS", strings.Join(seq, " "))
}

// TestWebhookExecutorProcess binds a task type to an HTTP endpoint with
// `ax executor --webhook`: the endpoint verifies every signature; 2xx
// succeeds, 4xx fails for good.
func TestWebhookExecutorProcess(t *testing.T) {
	secret := "a-webhook-secret-of-32-bytes-len"
	t.Setenv("AX_WEBHOOK_SECRET", secret)
	var mu sync.Mutex
	calls := map[string]int{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := executor.VerifyWebhook([]byte(secret), r, time.Minute, time.Now())
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var req struct {
			ID      string          `json:"id"`
			Payload json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		calls[req.ID]++
		mu.Unlock()
		if strings.Contains(string(req.Payload), "refuse") {
			http.Error(w, "order unknown", http.StatusUnprocessableEntity)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()

	c := newCluster(t)
	c.service(t, "submitter", "sub-1")
	c.service(t, "timer", "timer-1")
	c.service(t, "dispatcher", "disp-1")
	c.service(t, "executor", "hook-exec", "--builtins=false", "--webhook", "billing.charge="+srv.URL)

	ids := c.submit(t, 5, contracts.SubmitRequest{Type: "billing.charge", Payload: []byte(`{"order":42}`)})
	refused := c.submit(t, 1, contracts.SubmitRequest{Type: "billing.charge", Payload: []byte(`{"order":"refuse"}`)})[0]
	testenv.Eventually(t, 30*time.Second, "webhook tasks finished", func() bool {
		return c.count(t, "status = 'SUCCESS'") == 5 && c.count(t, "status = 'FAILED'") == 1
	})
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		require.Equal(t, 1, calls[id], "task %s delivered once", id)
	}
	require.Equal(t, 1, calls[refused], "a 4xx is not retried")
	var dead int
	require.NoError(t, c.db.QueryRow(`SELECT COUNT(*) FROM dead_letters WHERE task_id = ?`, refused).Scan(&dead))
	require.Equal(t, 1, dead)
}

// TestClusterLimitAcrossExecutorProcesses: two executor processes with 10
// workers each never run more than the type's limit of 3 at once.
func TestClusterLimitAcrossExecutorProcesses(t *testing.T) {
	c := newCluster(t)
	c.service(t, "submitter", "sub-1")
	c.service(t, "timer", "timer-1")
	c.service(t, "dispatcher", "disp-1")
	c.service(t, "executor", "exec-a", "--concurrency", "10")
	c.service(t, "executor", "exec-b", "--concurrency", "10")
	limit := 3
	_, err := c.api.UpdateType(context.Background(), "ax.sleep", contracts.TaskTypeUpdate{Concurrency: &limit})
	require.NoError(t, err)
	time.Sleep(2500 * time.Millisecond) // executors refresh type settings every 2 s

	const n = 30
	c.submit(t, n, contracts.SubmitRequest{Type: "ax.sleep", Payload: []byte(`{"ms":200}`)})
	most := 0
	testenv.Eventually(t, 60*time.Second, "all tasks SUCCESS", func() bool {
		most = max(most, c.count(t, "status = 'RUNNING'"))
		return c.count(t, "status = 'SUCCESS'") == n
	})
	var executors int
	require.NoError(t, c.db.QueryRow(`SELECT COUNT(DISTINCT executor_addr) FROM tasks`).Scan(&executors))
	t.Logf("most RUNNING at once: %d of a limit of %d, over %d executor processes", most, limit, executors)
	require.LessOrEqual(t, most, limit)
	require.Equal(t, 2, executors)
}

// TestDeadNodeRecoveredByMembership: three executors run 300 tasks; the
// one running the most is killed with SIGKILL. Its tasks are handed on
// when it misses three heartbeats — long before their 31 s leases lapse —
// and every task ends SUCCESS, none of the dead node's running more than
// twice. The tasks are submitted once every router has had the time to
// read the three executors from the registry (route.RefreshInterval): a
// router that has not routes every task to the nodes it knows.
func TestDeadNodeRecoveredByMembership(t *testing.T) {
	c := newCluster(t)
	c.service(t, "submitter", "sub-1")
	c.service(t, "timer", "timer-1")
	c.service(t, "dispatcher", "disp-1")
	c.service(t, "reaper", "reaper-1")
	execs := map[string]*proc{}
	for _, name := range []string{"exec-a", "exec-b", "exec-c"} {
		execs[name] = c.service(t, "executor", name, "--concurrency", "120")
	}
	testenv.AwaitLiveExecutors(t, c.api, 3, 10*time.Second)
	time.Sleep(route.RefreshInterval + 500*time.Millisecond)
	const n = 300
	ids := c.submit(t, n, contracts.SubmitRequest{Type: "ax.sleep", Timeout: "30s", Payload: []byte(`{"ms":8000}`)})
	testenv.Eventually(t, 60*time.Second, "every task claimed", func() bool {
		return c.count(t, "status IN ('RUNNING', 'SUCCESS')") == n
	})
	var victim string
	require.NoError(t, c.db.QueryRow(`SELECT executor_addr FROM tasks WHERE status = 'RUNNING'
		GROUP BY executor_addr ORDER BY COUNT(*) DESC, executor_addr LIMIT 1`).Scan(&victim))
	require.Contains(t, execs, victim)
	execs[victim].kill9(t)
	killed := time.Now()
	// Counted after the kill: a dead process finishes nothing more, and the
	// reaper needs three missed heartbeats before it moves anything.
	victims := c.count(t, "status = 'RUNNING' AND executor_addr = ?", victim)
	require.Positive(t, victims)

	testenv.Eventually(t, 90*time.Second, "all tasks SUCCESS", func() bool {
		return c.count(t, "status = 'SUCCESS'") == n
	})
	var recovered int
	var lastRerun, lastReady time.Time
	for _, id := range ids {
		h, err := c.api.History(context.Background(), id)
		require.NoError(t, err)
		runs := 0
		for i, e := range h.History {
			if e.To == contracts.StatusRunning {
				runs++
				if runs == 2 && e.At.After(lastRerun) {
					lastRerun = e.At
				}
			}
			if e.From == contracts.StatusRunning && e.To == contracts.StatusReady {
				require.Contains(t, e.Reason, "executor "+victim+" is dead", "task %s row %d", id, i)
				recovered++
				if e.At.After(lastReady) {
					lastReady = e.At
				}

			}
		}
		require.LessOrEqual(t, runs, 2, "task %s ran more than twice", id)
	}
	require.Equal(t, victims, recovered, "every task of the dead node was handed on, and no other")
	t.Logf("%d tasks of the killed executor: all handed back %s and running again %s after SIGKILL (heartbeat 3 s, 3 missed = dead, reaper pass 1 s)",
		victims, lastReady.Sub(killed).Round(100*time.Millisecond), lastRerun.Sub(killed).Round(100*time.Millisecond))

	nodes, err := c.api.ListNodes(context.Background())
	require.NoError(t, err)
	alive := map[string]bool{}
	for _, nd := range nodes.Nodes {
		alive[nd.Name] = nd.Alive
	}
	want := map[string]bool{"exec-a": true, "exec-b": true, "exec-c": true}
	want[victim] = false
	require.Equal(t, want, alive)
}
