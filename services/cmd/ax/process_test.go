package main

// Tests that run ax as real OS processes: the built binary, a standalone
// NATS server, real MySQL and Redis. They prove what in-process tests
// cannot: separate services cooperating only through NATS, Redis and MySQL,
// and recovery from a process killed with SIGKILL.

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
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
}

func start(t *testing.T, name, bin string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), "AX_LOG_LEVEL=info")
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
	_, k := testenv.Redis(t)

	port := testenv.FreePort(t)
	start(t, "nats-server", filepath.Join(bin, "nats-server"), "-a", "127.0.0.1", "-p", strconv.Itoa(port),
		"-js", "-sd", filepath.Join(t.TempDir(), "js"))
	c := &cluster{bin: filepath.Join(bin, "ax"), dsn: dsn, db: db, prefix: k.Prefix,
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
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	args := append([]string{svc, "--http", addr, "--node", node}, c.commonFl...)
	args = append(args, extra...)
	p := start(t, node, c.bin, args...)
	testenv.Eventually(t, 30*time.Second, svc+" ready", func() bool {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("%s exited during start-up: %v", node, err)
		default:
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
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
	fast := []string{"--lock-ttl", "2s", "--renew-interval", "500ms"}
	c.service(t, "submitter", "sub-1")
	c.service(t, "timer", "timer-1")
	c.service(t, "dispatcher", "disp-1")
	c.service(t, "reaper", "reaper-1", "--reap-interval", "500ms", "--reap-silence", "2s")
	victim := c.service(t, "executor", "exec-a", fast...)

	const n = 20
	ids := c.submit(t, n, contracts.SubmitRequest{Type: "ax.sleep", Payload: []byte(`{"ms":4000}`)})
	testenv.Eventually(t, 30*time.Second, "all tasks RUNNING on exec-a", func() bool {
		return c.count(t, "status = 'RUNNING' AND executor_addr = 'exec-a'") == n
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
