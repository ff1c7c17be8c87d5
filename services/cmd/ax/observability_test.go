package main

// Tests that keep docs/observability.md, the alert rules, the dashboards
// and the runbook true against a running ax: the metrics they name exist,
// the counts move with the work, and every runbook command runs.

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
	promrules "github.com/axsched/ax/infra/prometheus"
	"github.com/axsched/ax/services/app"
	"github.com/axsched/ax/services/demo"
	"github.com/axsched/ax/services/internal/natsembed"
	"github.com/axsched/ax/services/internal/testenv"
)

// repoRoot is the repository's root, from this package's directory.
const repoRoot = "../../.."

// liveAx is an ax with all five services running in this test process.
type liveAx struct {
	addr string
	api  *client.Client
}

// startLiveAx runs ax in process on a fresh database, its own Redis key
// prefix and an embedded NATS, serving the demonstration types; it stops
// when the test ends.
func startLiveAx(t *testing.T, opts ...func(*app.Config)) *liveAx {
	t.Helper()
	rdb, k := testenv.Redis(t)
	listen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	ready := make(chan string, 1)
	cfg := app.Config{
		MySQLDSN: testenv.MySQLDSN(t), RedisAddr: rdb.Options().Addr, RedisPrefix: k.Prefix,
		EmbeddedNATS: true, Embedded: natsembed.Config{Listen: listen, StoreDir: filepath.Join(t.TempDir(), "nats")},
		HTTPAddr: "127.0.0.1:0", Node: "observe", NodeID: 9, Types: demo.Types(),
		OnReady: func(addr string) { ready <- addr },
	}
	for _, o := range opts {
		o(&cfg)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, cfg, app.AllServices, testenv.Logger(t)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(60 * time.Second):
			t.Error("ax did not stop within 60s")
		}
	})
	select {
	case addr := <-ready:
		return &liveAx{addr: addr, api: client.New("http://" + addr)}
	case err := <-done:
		t.Fatalf("ax did not start: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("ax did not start within 30s")
	}
	return nil
}

// scrape is one read of /metrics: the raw text, each family's type, and
// each sample's value by its series as written ("name{a=\"x\"}").
type scrape struct {
	text    string
	types   map[string]string
	samples map[string]float64
}

func (a *liveAx) scrape(t *testing.T) scrape {
	t.Helper()
	res, err := http.Get("http://" + a.addr + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusOK, res.StatusCode)
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	s := scrape{text: string(body), types: map[string]string{}, samples: map[string]float64{}}
	sc := bufio.NewScanner(strings.NewReader(s.text))
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			s.types[f[2]] = f[3]
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		s.samples[line[:i]] = v
	}
	return s
}

// has reports whether a metric name is served, histogram and summary
// series (_bucket, _sum, _count) counting as their family.
func (s scrape) has(name string) bool {
	if _, ok := s.types[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if typ := s.types[base]; typ == "histogram" || typ == "summary" {
				return true
			}
		}
	}
	return false
}

// sum adds the samples of a metric whose labels include every given pair.
func (s scrape) sum(name string, labels ...string) float64 {
	total := 0.0
	for series, v := range s.samples {
		if series != name && !strings.HasPrefix(series, name+"{") {
			continue
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if !strings.Contains(series, labels[i]+`="`+labels[i+1]+`"`) {
				match = false
			}
		}
		if match {
			total += v
		}
	}
	return total
}

var metricName = regexp.MustCompile(`\bax_[a-z0-9_]+`)

// documentedMetrics reads the metric names of docs/observability.md's
// table (rows that start with a metric in backticks).
func documentedMetrics(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs/observability.md"))
	require.NoError(t, err)
	var out []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(ax_[a-z0-9_]+)`").FindAllStringSubmatch(string(doc), -1) {
		out = append(out, m[1])
	}
	require.Greater(t, len(out), 30, "the metrics table of docs/observability.md was not found")
	return out
}

// ruleMetrics reads the metric names alerts.yml's rules use (comments
// left out).
func ruleMetrics(t *testing.T) []string {
	t.Helper()
	rules, err := os.ReadFile(filepath.Join(repoRoot, "infra/prometheus/alerts.yml"))
	require.NoError(t, err)
	var out []string
	for _, line := range strings.Split(string(rules), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		out = append(out, metricName.FindAllString(line, -1)...)
	}
	require.NotEmpty(t, out)
	return out
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// dashboards reads infra/grafana/*.json by file name (business,
// scheduling, resources).
func dashboards(t *testing.T) map[string]dashboard {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "infra/grafana/*.json"))
	require.NoError(t, err)
	out := map[string]dashboard{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		var d dashboard
		require.NoError(t, json.Unmarshal(b, &d), f)
		out[strings.TrimSuffix(filepath.Base(f), ".json")] = d
	}
	require.Len(t, out, 3, "business, scheduling and resources")
	return out
}

// Every metric the docs list, every alert rule reads and every dashboard
// panel queries is on a running ax's /metrics from its start, before any
// task ran; and the scrape passes promtool's checks of names and help.
func TestMetricsNamedAnywhereExistOnAFreshAx(t *testing.T) {
	a := startLiveAx(t)
	// The cluster gauges come from the reaper's first read of the
	// registry, a pass after the executor's first heartbeat.
	var s scrape
	testenv.Eventually(t, 10*time.Second, "the reaper's view of the cluster on /metrics", func() bool {
		s = a.scrape(t)
		return s.sum("ax_cluster_shards_owned", "type", demo.TypeNoop) > 0
	})
	for _, name := range documentedMetrics(t) {
		require.True(t, s.has(name), "docs/observability.md lists %s, which /metrics does not serve", name)
	}
	for _, name := range ruleMetrics(t) {
		require.True(t, s.has(name), "an alert rule reads %s, which /metrics does not serve", name)
	}
	panels := 0
	for file, d := range dashboards(t) {
		for _, p := range d.Panels {
			panels++
			require.NotEmpty(t, p.Targets, "%s: panel %q has no query", file, p.Title)
			for _, tg := range p.Targets {
				names := metricName.FindAllString(tg.Expr, -1)
				require.NotEmpty(t, names, "%s: panel %q queries no ax metric: %s", file, p.Title, tg.Expr)
				for _, name := range names {
					require.True(t, s.has(name), "%s: panel %q queries %s, which /metrics does not serve", file, p.Title, name)
				}
			}
		}
	}
	require.InDelta(t, 16, panels, 4, "about sixteen panels in all")

	check := exec.Command(promrules.Promtool(t), "check", "metrics")
	check.Stdin = strings.NewReader(s.text)
	out, err := check.CombinedOutput()
	require.NoError(t, err, "promtool check metrics:\n%s", out)
}

// The metrics follow the work: tasks submitted, run, failed into a dead
// letter and delayed move the counts that say so, and the cluster gauges
// show the one executor and its shards.
func TestMetricsFollowTheWork(t *testing.T) {
	a := startLiveAx(t)
	ctx := t.Context()
	before := a.scrape(t)
	var ids []string
	for range 5 {
		task, err := a.api.Submit(ctx, contracts.SubmitRequest{Type: demo.TypeNoop})
		require.NoError(t, err)
		ids = append(ids, task.ID)
	}
	delayed, err := a.api.Submit(ctx, contracts.SubmitRequest{Type: demo.TypeNoop, Delay: "300ms"})
	require.NoError(t, err)
	ids = append(ids, delayed.ID)
	failing := deadLetter(t, a)
	for _, id := range ids {
		waitStatus(t, a, id, contracts.StatusSuccess)
	}

	var after scrape
	testenv.Eventually(t, 10*time.Second, "the relay's and timer's figures", func() bool {
		after = a.scrape(t)
		// Counters move just after the commits the API already shows.
		return after.sum("ax_relay_lag_seconds_count") > before.sum("ax_relay_lag_seconds_count") &&
			after.sum("ax_timer_loop_delay_seconds_count") > before.sum("ax_timer_loop_delay_seconds_count") &&
			after.sum("ax_transfers_total", "to", "SUCCESS")-before.sum("ax_transfers_total", "to", "SUCCESS") >= 6 &&
			after.sum("ax_transfers_total", "to", "FAILED")-before.sum("ax_transfers_total", "to", "FAILED") >= 1 &&
			// Observed just after the outcome commit the API shows.
			after.sum("ax_task_hop_seconds_count", "hop", "end_to_outcome")-before.sum("ax_task_hop_seconds_count", "hop", "end_to_outcome") >= 7 &&
			// The reaper reads the registry once a second: its first pass
			// may have come before the executor's first heartbeat.
			// The gauges are process-wide: an earlier test's reaper may have
			// left them, and one pass sets them one after another, so wait
			// for a pass that has seen this node with its types and shards.
			after.sum("ax_cluster_executors", "state", "alive") == 1 &&
			after.sum("ax_cluster_type_executors", "type", demo.TypeNoop) == 1 &&
			after.sum("ax_cluster_shards_owned", "node", "observe", "type", demo.TypeNoop) == 64
	})
	moved := func(name string, labels ...string) float64 {
		return after.sum(name, labels...) - before.sum(name, labels...)
	}
	require.Equal(t, 6.0, moved("ax_tasks_submitted_total", "type", demo.TypeNoop, "deduplicated", "false"))
	require.Equal(t, 6.0, moved("ax_executor_runs_total", "type", demo.TypeNoop, "outcome", "success"))
	require.Equal(t, 6.0, moved("ax_executor_run_seconds_count", "type", demo.TypeNoop))
	require.Equal(t, 1.0, moved("ax_executor_runs_total", "type", demo.TypeFlaky, "outcome", "failed"), "task %s", failing)
	require.Equal(t, 1.0, moved("ax_transfers_total", "to", "FAILED"))
	// Seven runs; the six due at once say when they were committed and sent
	// (the delayed one went through the timer, which says neither).
	for hop, runs := range map[string]float64{"commit_to_send": 6, "send_to_stored": 6, "stored_to_fetch": 7,
		"fetch_to_claim": 7, "claim_to_start": 7, "end_to_outcome": 7} {
		require.Equal(t, runs, moved("ax_task_hop_seconds_count", "hop", hop), hop)
	}
	require.GreaterOrEqual(t, moved("ax_transfers_total", "to", "SUCCESS"), 6.0)
	require.GreaterOrEqual(t, moved("ax_timer_due_total", "lane", "normal"), 1.0, "the delayed task went through the timer")
	require.Zero(t, after.sum("ax_executor_active_workers", "type", demo.TypeNoop), "nothing runs any more")
	require.Equal(t, 1.0, after.sum("ax_cluster_executors", "state", "alive"))
	require.Equal(t, 1.0, after.sum("ax_cluster_type_executors", "type", demo.TypeNoop))
	require.Equal(t, 64.0, after.sum("ax_cluster_shards_owned", "node", "observe", "type", demo.TypeNoop), "one node owns every shard")
}

// deadLetter submits an ax.flaky task that fails for good at once and
// waits for its dead letter; it returns the task's ID.
func deadLetter(t *testing.T, a *liveAx) string {
	t.Helper()
	task, err := a.api.Submit(t.Context(), contracts.SubmitRequest{Type: demo.TypeFlaky,
		Payload: json.RawMessage(`{"fail_times": 5, "permanent": true}`)})
	require.NoError(t, err)
	waitStatus(t, a, task.ID, contracts.StatusFailed)
	return task.ID
}

func waitStatus(t *testing.T, a *liveAx, id string, want contracts.Status) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, "task "+id+" "+string(want), func() bool {
		task, err := a.api.Get(t.Context(), id)
		return err == nil && task.Status == want
	})
}

// The runbook's symptom table names, for each symptom, the ax command that
// checks it and the dashboard panel that shows it: every `ax ...` command
// of the runbook runs against a live ax and succeeds (placeholders filled
// with a real task, type and dead letter), and every panel it names exists.
func TestRunbookCommandsAndPanels(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs/operations.md"))
	require.NoError(t, err)
	_, runbook, found := strings.Cut(string(doc), "\n## Runbook\n")
	require.True(t, found, "docs/operations.md has no Runbook section")

	panels := map[string]bool{}
	for file, d := range dashboards(t) {
		for _, p := range d.Panels {
			panels[file+": "+p.Title] = true
		}
	}
	symptoms := 0
	for _, row := range regexp.MustCompile(`(?m)^\| ([^|]+) \| ([^|]*`+"`ax "+`[^|]*) \| ([^|]+) \| [^|]+ \|$`).FindAllStringSubmatch(runbook, -1) {
		symptoms++
		for _, p := range strings.Split(row[3], "; ") {
			require.True(t, panels[strings.TrimSpace(p)], "symptom %q names panel %q, which no dashboard has", row[1], p)
		}
	}
	require.GreaterOrEqual(t, symptoms, 6, "the symptom table: never runs, runs twice, pool rejects, timeout but running, lost after scale-in, database load spike")

	a := startLiveAx(t)
	failed := deadLetter(t, a)
	letters, err := a.api.ListDeadLetters(t.Context(), client.DeadLetterFilter{Type: demo.TypeFlaky})
	require.NoError(t, err)
	require.NotEmpty(t, letters.DeadLetters)
	fill := strings.NewReplacer("<id>", failed, "<type>", demo.TypeFlaky, "<dead-letter-id>", letters.DeadLetters[0].ID)

	seen := map[string]bool{}
	for _, m := range regexp.MustCompile("`(ax [^`]+)`").FindAllStringSubmatch(runbook, -1) {
		line := strings.Join(strings.Fields(m[1]), " ")
		if seen[line] {
			continue
		}
		seen[line] = true
		args := strings.Fields(fill.Replace(line))[1:]
		require.Contains(t, []string{"task", "type", "dlq", "nodes", "stats", "schedule", "workflow", "lineage", "rollout"}, args[0],
			"runbook command %q: only API commands can be checked against a running ax", line)
		out, err := runAx(t, append(args, "--api", "http://"+a.addr)...)
		require.NoError(t, err, "runbook command %q failed; it printed:\n%s", line, out)
		require.NotEmpty(t, out, "runbook command %q printed nothing", line)
	}
	require.GreaterOrEqual(t, len(seen), 10)
}
