package bench

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/testenv"
)

// binDir returns the directory with the built ax and nats-server (make
// sets AX_TEST_BIN_DIR for `make test`); without them the test is skipped,
// or fails under CI=true.
func binDir(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real ax processes")
	}
	dir := os.Getenv("AX_TEST_BIN_DIR")
	if dir == "" {
		testenv.Unavailable(t, "ax binaries", fmt.Errorf("AX_TEST_BIN_DIR is not set (make build bin/nats-server, then AX_TEST_BIN_DIR=$PWD/bin)"))
	}
	for _, b := range []string{"ax", "nats-server"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			testenv.Unavailable(t, "ax binaries", err)
		}
	}
	return dir
}

// mysqlServer returns the test MySQL server's DSN with the harness's
// database prefix, or skips when it is down.
func mysqlServer(t *testing.T) string {
	t.Helper()
	base := os.Getenv("AX_TEST_MYSQL_DSN")
	if base == "" {
		base = "root@tcp(127.0.0.1:3306)/"
	}
	c, err := mysql.ParseDSN(base)
	require.NoError(t, err)
	c.DBName = ""
	db, err := sql.Open("mysql", c.FormatDSN())
	require.NoError(t, err)
	defer db.Close()
	if err := db.Ping(); err != nil {
		testenv.Unavailable(t, "mysql", err)
	}
	c.DBName = "axtest_bench_" + testenv.Suffix()
	return c.FormatDSN()
}

// TestEveryWorkload runs every workload at a tiny size against ax started
// by the harness and checks structural truths, never speed: every task
// reported exactly once, none early, every figure present and positive,
// nothing left behind.
func TestEveryWorkload(t *testing.T) {
	dir := binDir(t)
	dsn := mysqlServer(t)
	rdb, _ := testenv.Redis(t)
	// CPU is read from /proc in 10 ms ticks: the retry run must last long
	// enough for ax's CPU to show.
	cfg := Config{
		Workloads: AllWorkloads, N: 200, Rate: 50, Duration: 2 * time.Second, Delay: time.Second, RetryN: 200,
		Concurrency: 16, Reps: 1, BatchSize: 50, BatchWorkers: 2, MaxInFlight: 100, StallTimeout: time.Minute,
		AxBin: filepath.Join(dir, "ax"), NATSServer: filepath.Join(dir, "nats-server"), Topology: TopologyUp,
		MySQLDSN: dsn, RedisAddr: rdb.Options().Addr, CPUProfileDir: t.TempDir(),
		Logger: testenv.Logger(t).With("test", t.Name()),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	results, err := Run(ctx, cfg)
	require.NoError(t, err)
	require.Len(t, results, len(AllWorkloads))

	figures := map[string][]string{
		Throughput: {mE2ETPS, mEnqueueTPS, mProcessTPS, mDrain},
		Latency: {"latency_p50_ms", "latency_p90_ms", "latency_p99_ms", "latency_max_ms", mTasksPerS,
			// Hops that take a round trip at least; commit_to_send is 0
			// for a task its submitter dispatched.
			"hop.send_to_stored_p50_ms", "hop.fetch_to_claim_p50_ms", "hop.end_to_outcome_p50_ms", "hop.end_to_outcome_p99_ms"},
		Delayed: {"delayed_p50_ms", "delayed_p99_ms", "delayed_max_ms"},
		Retry:   {mRetryTotal},
	}
	costs := []string{mWindow, "cpu_s.ax", "peak_rss_mb.ax", "peak_rss_mb.nats", "cpu_s.total",
		"cpu_ms_per_task.ax", "cpu_ms_per_task.total"}
	// NATS stores few messages a task since transfers travel together: a
	// tiny run may cost it less than one 10 ms tick, so its CPU must be
	// there but may read 0.
	present := []string{"cpu_s.nats", "cpu_ms_per_task.nats"}
	for i, r := range results {
		require.Equal(t, AllWorkloads[i], r.Workload)
		for _, name := range append(figures[r.Workload], costs...) {
			v, ok := r.Metric(name)
			require.True(t, ok, "%s: %s missing", r.Workload, name)
			require.Positive(t, v, "%s: %s", r.Workload, name)
		}
		for _, name := range present {
			v, ok := r.Metric(name)
			require.True(t, ok, "%s: %s missing", r.Workload, name)
			require.GreaterOrEqual(t, v, 0.0, "%s: %s", r.Workload, name)
		}
		for _, name := range []string{mMissing, mDuplicates, mDropped} {
			v, ok := r.Metric(name)
			require.True(t, ok, "%s: %s missing", r.Workload, name)
			require.Zero(t, v, "%s: %s: every task must be reported exactly once", r.Workload, name)
		}
		tasks, _ := r.Metric(mTasks)
		runs, _ := r.Metric(mRuns)
		switch r.Workload {
		case Throughput:
			require.Equal(t, 200.0, tasks)
			require.Equal(t, tasks, runs, "one run per task")
			paused, _ := r.Metric(mRanWhilePaused)
			require.Zero(t, paused, "no task ran while its type was paused")
		case Latency, Delayed:
			require.Equal(t, 100.0, tasks, "rate 50 for 2 s")
			require.Equal(t, tasks, runs)
			if r.Workload == Latency {
				// 100 tasks over the 2 s of sending and the last one's
				// way through: about the rate sent, never above it by far.
				perS, _ := r.Metric(mTasksPerS)
				require.InDelta(t, 50, perS, 15, "tasks_per_s")
			}
		case Retry:
			require.Equal(t, 200.0, tasks)
			require.Equal(t, 2*tasks, runs, "a failed first attempt and a successful retry")
		}
	}
	early, ok := results[2].Metric(mEarly)
	require.True(t, ok)
	require.Zero(t, early, "no delayed task may start before its due time")

	for _, w := range AllWorkloads {
		info, err := os.Stat(filepath.Join(cfg.CPUProfileDir, w+"-1-up.pprof"))
		require.NoError(t, err, "the %s run's ax was asked for a CPU profile", w)
		require.Positive(t, info.Size(), "the %s run's ax wrote its CPU profile: it stopped cleanly", w)
	}

	var table, lines bytes.Buffer
	require.NoError(t, Write(&table, FormatTable, results))
	require.Contains(t, table.String(), "submit=batch")
	require.NoError(t, Write(&lines, FormatJSON, results))
	require.Len(t, strings.Split(strings.TrimSpace(lines.String()), "\n"), len(AllWorkloads))
	t.Logf("\n%s", table.String())

	requireNothingLeft(t, dsn)
}

// requireNothingLeft checks that the runs dropped their databases and that
// no process they started survived.
func requireNothingLeft(t *testing.T, dsn string) {
	t.Helper()
	c, _ := mysql.ParseDSN(dsn)
	prefix := c.DBName
	c.DBName = ""
	db, err := sql.Open("mysql", c.FormatDSN())
	require.NoError(t, err)
	defer db.Close()
	var n int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name LIKE ?`, prefix+`\_%`).Scan(&n))
	require.Zero(t, n, "bench databases left behind")
	self := os.Getpid()
	for _, pid := range FindProcs("", "ax", "nats-server") {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		var ppid int
		fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		_, _ = fmt.Sscan(fields[1], &ppid)
		require.NotEqual(t, self, ppid, "child %d still running", pid)
	}
}

// TestCompareSides runs the retry workload on two sides, each started
// through a wrapper of the ax binary that logs how it was started: the
// sides take turns going first (ABBA), only side B's processes get B's
// flag, both report every task exactly once, and the report sets B
// against A rep by rep.
func TestCompareSides(t *testing.T) {
	dir := binDir(t)
	dsn := mysqlServer(t)
	rdb, _ := testenv.Redis(t)
	tmp := t.TempDir()
	starts := filepath.Join(tmp, "starts.log")
	wrapper := func(side string) string {
		p := filepath.Join(tmp, "ax-"+side)
		script := fmt.Sprintf("#!/bin/sh\necho \"%s $*\" >> '%s'\nexec '%s' \"$@\"\n", side, starts, filepath.Join(dir, "ax"))
		require.NoError(t, os.WriteFile(p, []byte(script), 0o755))
		return p
	}
	cfg := Config{
		Workloads: []string{Retry}, N: 1, Rate: 1, Duration: time.Second, RetryN: 100,
		Concurrency: 16, Reps: 2, BatchSize: 50, BatchWorkers: 2, MaxInFlight: 100, StallTimeout: time.Minute,
		AxBin: wrapper(SideA), VsAxBin: wrapper(SideB), VsAxFlags: []string{"--outcome-writers=2"},
		NATSServer: filepath.Join(dir, "nats-server"), Topology: TopologyUp,
		MySQLDSN: dsn, RedisAddr: rdb.Options().Addr, Logger: testenv.Logger(t).With("test", t.Name()),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	results, err := Run(ctx, cfg)
	require.NoError(t, err)
	require.Len(t, results, 2)
	for i, side := range []string{SideA, SideB} {
		r := results[i]
		require.Equal(t, Retry, r.Workload)
		require.Equal(t, side, r.Side)
		require.Equal(t, 2, r.Reps)
		tasks, _ := r.Metric(mTasks)
		runs, _ := r.Metric(mRuns)
		require.Equal(t, 100.0, tasks, "side %s", side)
		require.Equal(t, 200.0, runs, "side %s: a failed first attempt and a successful retry each", side)
		for _, name := range []string{mMissing, mDuplicates, mDropped} {
			v, _ := r.Metric(name)
			require.Zero(t, v, "side %s: %s", side, name)
		}
	}

	data, err := os.ReadFile(starts)
	require.NoError(t, err)
	var order []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		side, args, _ := strings.Cut(line, " ")
		if !strings.HasPrefix(args, "up ") {
			continue // its migrate
		}
		order = append(order, side)
		require.Equal(t, side == SideB, strings.Contains(args, "--outcome-writers=2"), "side %s started as %q", side, args)
	}
	require.Equal(t, []string{SideA, SideB, SideB, SideA}, order, "each rep's sides in turn, neither always first")

	cs := Compare(results)
	require.NotEmpty(t, cs)
	require.Equal(t, mRetryTotal, cs[0].Metric)
	require.Equal(t, 2, cs[0].Pairs, "both reps measured on both sides")
	var table bytes.Buffer
	require.NoError(t, Write(&table, FormatTable, results))
	require.Contains(t, table.String(), "ax_flags=--outcome-writers=2")
	t.Logf("\n%s", table.String())

	requireNothingLeft(t, dsn)
}
