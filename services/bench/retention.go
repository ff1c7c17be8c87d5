package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"
)

// RetentionNDefault is how many finished tasks the retention workload
// seeds: the backlog pruned while the latency workload runs.
const RetentionNDefault = 1_000_000

// Retention workload settings: the seeded tasks ended 2 to 3 hours ago,
// and the pruning run keeps SUCCESS tasks an hour, so all are due.
const (
	seedEndedFrom  = 3 * time.Hour
	seedEndedSpan  = time.Hour
	seedRetainOn   = time.Hour
	seedChunk      = 1000 // tasks per INSERT (and 3 history rows each)
	seedWorkers    = 2
	seedHistoryPer = 3
)

// Retention figures.
const (
	mSeeded         = "seeded"
	mPruned         = "pruned_in_window"
	mPrunedRate     = "pruned_per_s"
	mSeededLeft     = "seeded_left"
	mP99Change      = "latency_p99_change_pct"
	retentionOff    = "off."
	retentionOn     = "on."
	retentionPrefix = mLatency + "_"
)

// retention measures what pruning a backlog of finished tasks costs the
// work in progress: it seeds RetentionN finished tasks (with history rows
// like real ones) into a fresh database, runs the latency workload with
// pruning off, then does the same on a second fresh ax whose retention
// makes every seeded task due, and reports both runs' latency, the change
// of the p99 and the tasks pruned during the measured window.
func retention(ctx context.Context, cfg *Config, label string) ([]Metric, error) {
	if cfg.Remote() {
		return nil, errors.New("the retention workload needs local mode: it seeds the database before ax starts")
	}
	var figures [2][]Metric
	for i, mode := range []struct {
		name   string
		retain string
	}{{"off", "0"}, {"on", seedRetainOn.String()}} {
		c := *cfg
		c.seed = func(ctx context.Context, dsn string) error { return seedFinished(ctx, dsn, cfg.RetentionN, cfg.Logger) }
		c.axArgs = []string{"--retain-success", mode.retain, "--retain-cancelled", "0", "--retain-failed", "0"}
		m, err := withRun(ctx, &c, label+"-"+mode.name, cfg.CPUProfileDir != "", (*run).retentionWindow)
		if err != nil {
			return nil, fmt.Errorf("pruning %s: %w", mode.name, err)
		}
		figures[i] = m
	}
	return retentionFigures(figures[0], figures[1]), nil
}

// retentionFigures keeps the latency of both runs (prefixed off. and on.),
// the p99 change, what was pruned, and the pruning run's checks and costs.
func retentionFigures(off, on []Metric) []Metric {
	var out []Metric
	value := func(ms []Metric, name string) float64 {
		for _, m := range ms {
			if m.Name == name {
				return m.Value
			}
		}
		return 0
	}
	for _, p := range []string{"p50", "p90", "p99", "max"} {
		name := retentionPrefix + p + "_ms"
		out = append(out, Metric{Name: retentionOff + name, Value: value(off, name)}, Metric{Name: retentionOn + name, Value: value(on, name)})
	}
	out = append(out, Metric{Name: retentionOff + mPruned, Value: value(off, mPruned)})
	p99 := retentionPrefix + "p99_ms"
	out = append(out, Metric{Name: mP99Change, Value: 100 * (value(on, p99) - value(off, p99)) / value(off, p99)})
	for _, m := range on {
		if !strings.HasPrefix(m.Name, retentionPrefix) {
			out = append(out, m)
		}
	}
	return out
}

// retentionWindow runs the latency workload and counts the seeded tasks
// pruned meanwhile.
func (r *run) retentionWindow(ctx context.Context) ([]Metric, error) {
	before, err := seededLeft(ctx, r.db, r.cfg.RetentionN)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	m, err := r.latency(ctx)
	elapsed := time.Since(t0)
	after, cerr := seededLeft(ctx, r.db, r.cfg.RetentionN)
	pruned := float64(before - after)
	r.logger.Info("retention window done", "seeded_left_before", before, "seeded_left_after", after)
	return append(m, Metric{Name: mSeeded, Value: float64(r.cfg.RetentionN)}, Metric{Name: mPruned, Value: pruned},
		Metric{Name: mPrunedRate, Value: pruned / elapsed.Seconds()}, Metric{Name: mSeededLeft, Value: float64(after)}), errors.Join(err, cerr)
}

// seededLeft counts the seeded tasks still in the database; their IDs are
// 1..n, far below any snowflake.
func seededLeft(ctx context.Context, db *sql.DB, n int) (int64, error) {
	var left int64
	if err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM tasks WHERE id <= ?`, n).Scan(&left); err != nil {
		return 0, fmt.Errorf("count seeded tasks: %w", err)
	}
	return left, nil
}

// seedFinished writes n SUCCESS tasks of ax.bench that ended between 3 and
// 2 hours ago, each with the three history rows a real run leaves
// (created READY, claimed RUNNING, SUCCESS), in multi-row INSERTs straight
// into MySQL, then moves the history relay's cursor past them: their
// events would have been published long ago.
func seedFinished(ctx context.Context, dsn string, n int, logger interface{ Info(string, ...any) }) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return fmt.Errorf("open mysql: %w", err)
	}
	defer db.Close()
	t0 := time.Now()
	base := t0.Add(-seedEndedFrom)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(seedWorkers)
	for from := 1; from <= n; from += seedChunk {
		to := min(from+seedChunk-1, n)
		g.Go(func() error { return seedChunkRows(gctx, db, from, to, n, base) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, `UPDATE event_relay SET last_id = (SELECT COALESCE(MAX(id), 0) FROM task_history) WHERE name = 'task_history'`); err != nil {
		return fmt.Errorf("move the relay cursor past the seeded history: %w", err)
	}
	logger.Info("seeded finished tasks", "tasks", n, "history_rows", seedHistoryPer*n, "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// seedChunkRows writes tasks from..to and their history in one transaction.
func seedChunkRows(ctx context.Context, db *sql.DB, from, to, n int, base time.Time) error {
	var tasks, history strings.Builder
	tasks.WriteString(`INSERT INTO tasks (id, task_type, priority, status, next_run_time, attempt, max_retry_count, timeout_ms,
		executor_addr, last_heartbeat_time, started_at, created_at, updated_at) VALUES `)
	history.WriteString(`INSERT INTO task_history (task_id, from_status, to_status, attempt, reason, actor, event_id, created_at,
		task_type, priority, next_run_time, route) VALUES `)
	ts := func(t time.Time) string { return "'" + t.UTC().Format("2006-01-02 15:04:05.000000") + "'" }
	for id := from; id <= to; id++ {
		end := base.Add(time.Duration(id) * seedEndedSpan / time.Duration(n))
		due, created := end.Add(-50*time.Millisecond), end.Add(-60*time.Millisecond)
		sep := ","
		if id == from {
			sep = ""
		}
		dueMs := strconv.FormatInt(due.UnixMilli(), 10)
		fmt.Fprintf(&tasks, "%s(%d,'ax.bench',1,'SUCCESS',%s,1,3,300000,'bench-seed',%s,%s,%s,%s)",
			sep, id, dueMs, ts(end), ts(due), ts(created), ts(end))
		for h, step := range [seedHistoryPer][3]string{{"", "READY", "submitted"}, {"READY", "RUNNING", "claimed by bench-seed"}, {"RUNNING", "SUCCESS", "handler succeeded"}} {
			at, hsep := []time.Time{created, due, end}[h], ","
			if id == from && h == 0 {
				hsep = ""
			}
			fmt.Fprintf(&history, "%s(%d,'%s','%s',%d,'%s','seed','%026d',%s,'ax.bench',1,%s,0)",
				hsep, id, step[0], step[1], min(h, 1), step[2], id*seedHistoryPer+h, ts(at), dueMs)
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("seed tasks %d..%d: %w", from, to, err)
	}
	defer tx.Rollback()
	for _, q := range []string{tasks.String(), history.String()} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("seed tasks %d..%d: %w", from, to, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("seed tasks %d..%d: %w", from, to, err)
	}
	return nil
}
