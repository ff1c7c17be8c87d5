package app_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
	"github.com/axsched/ax/services/app"
	"github.com/axsched/ax/services/demo"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/natsembed"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// system is `ax up` wired in-process against real servers.
type system struct {
	api     *client.Client
	addr    string // the HTTP address of the API and health checks
	db      *sql.DB
	dsn     string
	natsURL string
	redis   string
	prefix  string
	stop    func()
	// caches is the clock the type settings caches of every instance
	// expire by; expireTypeCaches skips it ahead.
	caches *testenv.Clock
}

func startSystem(t *testing.T, redisAddr, prefix string, mutate func(*app.Config)) *system {
	t.Helper()
	return startSystemWith(t, app.AllServices, redisAddr, prefix, mutate)
}

// startSystemWith starts the first instance of a system: it owns the
// embedded NATS server and runs services; join adds more instances.
func startSystemWith(t *testing.T, services []app.Service, redisAddr, prefix string, mutate func(*app.Config)) *system {
	t.Helper()
	return startSystemOn(t, testenv.MySQLDSN(t), services, redisAddr, prefix, mutate)
}

// startSystemOn is startSystemWith on a given database (and MySQL user).
func startSystemOn(t *testing.T, dsn string, services []app.Service, redisAddr, prefix string, mutate func(*app.Config)) *system {
	t.Helper()
	cfg, err := store.ParseDSN(dsn) // parsed times, UTC, like ax itself
	require.NoError(t, err)
	db, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	listen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	s := runApp(t, services, &testenv.Clock{}, func(c *app.Config) {
		c.MySQLDSN, c.RedisAddr, c.RedisPrefix = dsn, redisAddr, prefix
		c.EmbeddedNATS = true
		c.Embedded = natsembed.Config{Listen: listen, StoreDir: filepath.Join(t.TempDir(), "nats")}
		if mutate != nil {
			mutate(c)
		}
	})
	s.db, s.dsn, s.natsURL, s.redis, s.prefix = db, dsn, "nats://"+listen, redisAddr, prefix
	return s
}

// join runs more services of the same system in another app instance (a
// second process, as far as the services can tell).
func (s *system) join(t *testing.T, services []app.Service, mutate func(*app.Config)) *system {
	t.Helper()
	return runApp(t, services, s.caches, func(c *app.Config) {
		c.MySQLDSN, c.RedisAddr, c.RedisPrefix, c.NATSURL = s.dsn, s.redis, s.prefix, s.natsURL
		c.Node = "e2e-joined"
		if mutate != nil {
			mutate(c)
		}
	})
}

func runApp(t *testing.T, services []app.Service, caches *testenv.Clock, mutate func(*app.Config)) *system {
	t.Helper()
	ready := make(chan string, 1)
	cfg := app.Config{
		HTTPAddr: "127.0.0.1:0", Node: "e2e", NodeID: 7,
		Types:          demo.Types(),
		OnReady:        func(addr string) { ready <- addr },
		TypeCacheClock: caches,
	}
	cfg.Timer.ReconcileInterval = time.Second
	cfg.Timer.ReconcileGrace = 2 * time.Second
	mutate(&cfg)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, cfg, services, testenv.Logger(t)) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("ax did not start: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("ax did not start within 30s")
	}
	s := &system{api: client.New(addr), addr: addr, caches: caches}
	var once sync.Once
	s.stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(60 * time.Second):
				t.Error("ax did not stop within 60s")
			}
		})
	}
	t.Cleanup(s.stop)
	return s
}

// ready asks the process's readiness endpoint, which checks its MySQL,
// Redis and NATS connections; nil means ready.
func (s *system) ready() error {
	res, err := http.Get("http://" + s.addr + "/readyz")
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz %d: %s", res.StatusCode, body)
	}
	return nil
}

// expireTypeCaches makes every instance's cached type settings expire, so
// that a type change made before it is seen by whatever comes after.
func (s *system) expireTypeCaches() { s.caches.Skip(time.Hour) }

func (s *system) countStatus(t *testing.T, status contracts.Status) int {
	t.Helper()
	var n int
	require.NoError(t, s.db.QueryRow(`SELECT COUNT(*) FROM tasks WHERE status = ?`, string(status)).Scan(&n))
	return n
}

// histories returns each task's sequence of target states.
func (s *system) histories(t *testing.T) map[int64]string {
	t.Helper()
	rows, err := s.db.Query(`SELECT task_id, GROUP_CONCAT(to_status ORDER BY id SEPARATOR '>') FROM task_history GROUP BY task_id`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[int64]string{}
	for rows.Next() {
		var id int64
		var seq string
		require.NoError(t, rows.Scan(&id, &seq))
		out[id] = seq
	}
	return out
}

func (s *system) historyRows(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, s.db.QueryRow(`SELECT COUNT(*) FROM task_history`).Scan(&n))
	return n
}

// streamEvents counts the events on AX_EVENTS, travelling alone or
// together.
func streamEvents(t *testing.T, url string) int {
	t.Helper()
	conn, err := bus.Connect(context.Background(), url, "e2e-check")
	require.NoError(t, err)
	defer conn.Close()
	return len(testenv.StreamEvents(t, conn.JS))
}

func submitMany(t *testing.T, api *client.Client, n, workers int, req contracts.SubmitRequest) []string {
	t.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				task, err := api.Submit(context.Background(), req)
				if err != nil {
					t.Errorf("submit %d: %v", i, err)
					continue
				}
				ids[i] = task.ID
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return ids
}

func TestEndToEndThousandNoopTasks(t *testing.T) {
	_, k := testenv.Redis(t)
	sys := startSystem(t, "127.0.0.1:6379", k.Prefix, nil)

	const n = 1000
	start := time.Now()
	ids := submitMany(t, sys.api, n, 16, contracts.SubmitRequest{Type: "ax.noop"})
	submitted := time.Since(start)
	testenv.Eventually(t, 120*time.Second, "all tasks SUCCESS", func() bool {
		return sys.countStatus(t, contracts.StatusSuccess) == n
	})
	elapsed := time.Since(start)
	t.Logf("%d ax.noop tasks: submitted in %s, all SUCCESS after %s (%.0f tasks/s end to end)",
		n, submitted.Round(time.Millisecond), elapsed.Round(time.Millisecond), n/elapsed.Seconds())

	var p50, p99, maxMs float64
	rows, err := sys.db.Query(`SELECT TIMESTAMPDIFF(MICROSECOND, r.created_at, u.created_at) / 1000
		FROM task_history r JOIN task_history u ON u.task_id = r.task_id
		WHERE r.to_status = 'READY' AND u.to_status = 'RUNNING' ORDER BY 1`)
	require.NoError(t, err)
	var lat []float64
	for rows.Next() {
		var v float64
		require.NoError(t, rows.Scan(&v))
		lat = append(lat, v)
	}
	rows.Close()
	require.Len(t, lat, n)
	p50, p99, maxMs = lat[n/2], lat[n*99/100], lat[n-1]
	t.Logf("submit-commit to claim-commit under this load: p50 %.1f ms, p99 %.1f ms, max %.1f ms", p50, p99, maxMs)

	hist := sys.histories(t)
	require.Len(t, hist, n)
	for _, id := range ids {
		i, err := strconv.ParseInt(id, 10, 64)
		require.NoError(t, err)
		require.Equal(t, "READY>RUNNING>SUCCESS", hist[i], "history of task %s", id)
	}
	// The relay may still be flushing the last events.
	want := sys.historyRows(t)
	require.Equal(t, 3*n, want)
	testenv.Eventually(t, 30*time.Second, "one event per history row", func() bool {
		return streamEvents(t, sys.natsURL) == want
	})

	// The API agrees with the database.
	task, err := sys.api.Get(context.Background(), ids[0])
	require.NoError(t, err)
	require.Equal(t, contracts.StatusSuccess, task.Status)
	h, err := sys.api.History(context.Background(), ids[0])
	require.NoError(t, err)
	require.Len(t, h.History, 3)
	require.Equal(t, "submitter@e2e", h.History[0].Actor)
	require.Equal(t, "executor@e2e", h.History[1].Actor)
	require.Equal(t, 1, h.History[2].Attempt)
}

// TestEndToEndWithoutGapTracking: with the plain relay (no gap tracking,
// events a settle window behind the newest history row) every task runs
// and every history row's event reaches the stream.
func TestEndToEndWithoutGapTracking(t *testing.T) {
	_, k := testenv.Redis(t)
	sys := startSystem(t, "127.0.0.1:6379", k.Prefix, func(c *app.Config) {
		c.Relay.NoGapTracking, c.Relay.Settle = true, 200*time.Millisecond
	})
	const n = 200
	submitMany(t, sys.api, n, 8, contracts.SubmitRequest{Type: "ax.noop"})
	testenv.Eventually(t, 60*time.Second, "all tasks SUCCESS", func() bool {
		return sys.countStatus(t, contracts.StatusSuccess) == n
	})
	want := sys.historyRows(t)
	require.Equal(t, 3*n, want)
	testenv.Eventually(t, 30*time.Second, "one event per history row", func() bool {
		return streamEvents(t, sys.natsURL) == want
	})
}

// TestRedisLossLosesNoTask wipes and restarts Redis while 2,000 delayed
// tasks wait in it, without restarting any service: the timer notices the
// lost index and rebuilds it from MySQL; every task runs once and none early.
func TestRedisLossLosesNoTask(t *testing.T) {
	redisSrv := testenv.StartRedis(t)
	sys := startSystem(t, redisSrv.Addr, "ax", nil)
	ctx := context.Background()

	// Batches make the setup short next to the delay, so every task is
	// still waiting in Redis when it is wiped.
	const n = 2000
	due := time.Now().Add(15 * time.Second).UTC().Format(time.RFC3339Nano)
	var batch contracts.BatchRequest
	for range n / 2 {
		batch.Tasks = append(batch.Tasks, contracts.SubmitRequest{Type: "ax.noop", RunAt: due})
	}
	for range 2 {
		_, err := sys.api.SubmitBatch(ctx, batch)
		require.NoError(t, err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: redisSrv.Addr})
	defer rdb.Close()
	testenv.Eventually(t, 20*time.Second, "tasks indexed in Redis", func() bool {
		total := int64(0)
		for _, p := range contracts.Priorities {
			total += rdb.ZCard(ctx, "ax:{sched}:lane:"+string(p)).Val()
		}
		return total == n
	})
	require.Zero(t, sys.countStatus(t, contracts.StatusRunning)+sys.countStatus(t, contracts.StatusSuccess),
		"the wipe must come before the tasks are due")
	require.NoError(t, rdb.FlushAll(ctx).Err())
	redisSrv.Stop()
	testenv.Eventually(t, 10*time.Second, "the process sees Redis gone", func() bool {
		return sys.ready() != nil
	})
	redisSrv.Start()

	testenv.Eventually(t, 90*time.Second, "all tasks SUCCESS", func() bool {
		return sys.countStatus(t, contracts.StatusSuccess) == n
	})
	for id, seq := range sys.histories(t) {
		require.Equal(t, "READY>RUNNING>SUCCESS", seq, "task %d ran more than once or strayed", id)
	}
	var early int
	require.NoError(t, sys.db.QueryRow(`SELECT COUNT(*) FROM task_history h JOIN tasks t ON t.id = h.task_id
		WHERE h.to_status = 'RUNNING'
		  AND TIMESTAMPDIFF(MICROSECOND, '1970-01-01', h.created_at) < t.next_run_time * 1000`).Scan(&early))
	require.Zero(t, early, "tasks started before their due time")
}
