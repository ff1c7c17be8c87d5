package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/contracts/client"
)

// webhookSecret signs the executors' calls to the receiver.
const webhookSecret = "chaos-suite-webhook-secret-0123456789"

// taskType is the one type the load submits; the executors serve it by
// calling the suite's receiver.
const taskType = "chaos.work"

// system is one scenario's private servers and ax processes.
type system struct {
	dir      string
	bin      string
	mysql    *proc
	redis    *proc
	nats     *proc
	dsn      string
	db       *sql.DB
	redisURL string
	natsURL  string
	// services by name: submitter, timer, dispatcher, exec-a, exec-b, reaper.
	services map[string]*proc
	order    []string
	api      *client.Client
}

func binDir(t *testing.T) string {
	t.Helper()
	d := os.Getenv("AX_TEST_BIN_DIR")
	if d == "" {
		d = "../../bin"
	}
	d, _ = filepath.Abs(d)
	for _, b := range []string{"ax", "nats-server"} {
		if _, err := os.Stat(filepath.Join(d, b)); err != nil {
			t.Fatalf("%s missing in %s: run make build bin/nats-server, or set AX_TEST_BIN_DIR", b, d)
		}
	}
	return d
}

// startServers starts a private MariaDB, Redis and NATS.
func startServers(t *testing.T, dir, bin string) *system {
	t.Helper()
	s := &system{dir: dir, bin: bin, services: map[string]*proc{}}

	data := filepath.Join(dir, "mysql")
	out, err := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+data, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	myPort := freePort(t)
	s.mysql = newProc(t, dir, "mariadb", "mariadbd", myPort, "--no-defaults", "--datadir="+data,
		"--port="+strconv.Itoa(myPort), "--bind-address=127.0.0.1", "--socket="+filepath.Join(dir, "mysql.sock"),
		"--user=root", "--skip-log-bin", "--innodb-buffer-pool-size=128M", "--max-connections=500")
	s.mysql.start(t)
	s.dsn = fmt.Sprintf("root@tcp(127.0.0.1:%d)/ax_chaos", myPort)

	rPort := freePort(t)
	s.redis = newProc(t, dir, "redis", "redis-server", rPort, "--port", strconv.Itoa(rPort), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir)
	s.redis.start(t)
	s.redisURL = "127.0.0.1:" + strconv.Itoa(rPort)

	nPort := freePort(t)
	s.nats = newProc(t, dir, "nats", filepath.Join(bin, "nats-server"), nPort, "-a", "127.0.0.1",
		"-p", strconv.Itoa(nPort), "-js", "-sd", filepath.Join(dir, "js"))
	s.nats.start(t)
	s.natsURL = "nats://127.0.0.1:" + strconv.Itoa(nPort)

	t.Cleanup(func() {
		for i := len(s.order) - 1; i >= 0; i-- {
			s.services[s.order[i]].stop(t, 5*time.Second)
		}
		s.nats.stop(t, 10*time.Second)
		s.redis.stop(t, 10*time.Second)
		s.mysql.stop(t, 30*time.Second)
	})

	out, err = exec.Command(filepath.Join(bin, "ax"), "migrate", "up", "--mysql-dsn", s.dsn).CombinedOutput()
	if err != nil {
		t.Fatalf("ax migrate up: %v\n%s", err, out)
	}
	s.db, err = sql.Open("mysql", s.dsn+"?parseTime=true")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.db.Close() })
	return s
}

// startServices starts the five services, two executors among them, each
// its own process, and waits for every /readyz.
func (s *system) startServices(t *testing.T, receiver string, extra []string) {
	t.Helper()
	for _, svc := range []struct{ name, cmd string }{
		{"submitter", "submitter"}, {"timer", "timer"}, {"dispatcher", "dispatcher"},
		{"exec-a", "executor"}, {"exec-b", "executor"}, {"reaper", "reaper"},
	} {
		port := freePort(t)
		// No --node: each start takes ax's default, a name new per process
		// start, as a restarted container would.
		args := []string{svc.cmd, "--http", "127.0.0.1:" + strconv.Itoa(port),
			"--mysql-dsn", s.dsn, "--redis-addr", s.redisURL, "--redis-prefix", "chaos",
			"--nats-url", s.natsURL, "--log-level", "info"}
		if svc.cmd == "executor" {
			args = append(args, "--webhook", taskType+"="+receiver, "--concurrency", "16")
		}
		args = append(args, extra...)
		p := newProc(t, s.dir, svc.name, filepath.Join(s.bin, "ax"), port, args...)
		p.env = []string{"AX_WEBHOOK_SECRET=" + webhookSecret}
		p.start(t)
		s.services[svc.name] = p
		s.order = append(s.order, svc.name)
		s.waitReady(t, p)
		if svc.name == "submitter" {
			s.api = client.New("127.0.0.1:" + strconv.Itoa(port))
		}
	}
}

// restart starts a killed process again and waits until it serves.
func (s *system) restart(t *testing.T, p *proc) {
	t.Helper()
	p.start(t)
	if _, ok := s.services[p.name]; ok {
		s.waitReady(t, p)
	}
}

func (s *system) waitReady(t *testing.T, p *proc) {
	t.Helper()
	url := "http://127.0.0.1:" + strconv.Itoa(p.port) + "/readyz"
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s not ready after 90s; log tail:\n%s", p.name, p.tail())
}
