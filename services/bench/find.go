package bench

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/axsched/ax/contracts/client"
	"github.com/axsched/ax/services/internal/idgen"
)

// FindNDefault is how many tasks the find workload seeds.
const FindNDefault = 1_000_000

// Find workload settings: tasks of findTypes types created over the last
// findSpan, mostly finished, as a table that kept a week of work looks.
const (
	findTypes   = 10
	findSpan    = 7 * 24 * time.Hour
	findCalls   = 200 // calls per query shape
	findPages   = 50  // pages walked through one cursor
	findPageLen = 100
)

// findStates is the seeded mix of states, in tenths of a percent: none is
// one the scheduler acts on (READY, RETRYING, RUNNING), so the started ax
// leaves the seed alone.
var findStates = stateMix{{"SUCCESS", 850}, {"FAILED", 50}, {"CANCELLED", 50}, {"SUSPEND", 50}}

// stateMix is a seed's states with their shares in tenths of a percent.
type stateMix []struct {
	status   string
	perMille int
}

// pick draws a state by its share.
func (m stateMix) pick(rng *rand.Rand) string {
	p := rng.IntN(1000)
	for _, s := range m {
		if p < s.perMille {
			return s.status
		}
		p -= s.perMille
	}
	return m[len(m)-1].status
}

// seedRow returns the i-th of n seeded rows' creation time, spread over
// the findSpan before now, and its ID: a snowflake of that time, the low
// bits keeping IDs of one millisecond apart as node and sequence bits do.
func seedRow(now time.Time, i, n int) (time.Time, int64) {
	// In float: i × a week in nanoseconds overflows an int64.
	created := now.Add(-findSpan).Add(time.Duration(float64(findSpan) * float64(i) / float64(n)))
	return created, idgen.FirstAt(created) + int64(i%4096)
}

// findWorkflowStates is the seeded mix of workflow states, in tenths of a
// percent: none still moving, so the started ax leaves them alone.
var findWorkflowStates = stateMix{{"SUCCEEDED", 900}, {"FAILED", 40}, {"CANCELLED", 30}, {"COMPENSATED", 30}}

// findWorkflowsPer is how many seeded tasks there are to one seeded
// workflow.
const findWorkflowsPer = 10

// findWorkflowQueries are the shapes of GET /v1/workflows timed, one per
// index path: the primary key, the state's index, a name checked on the
// primary key's rows, the business key's index.
var findWorkflowQueries = []struct {
	name   string
	filter client.WorkflowFilter
}{
	{"newest", client.WorkflowFilter{}},
	{"status", client.WorkflowFilter{Status: "FAILED"}},
	{"name", client.WorkflowFilter{Name: "find.w2"}},
	{"biz_key", client.WorkflowFilter{BizKey: "order-12"}},
}

// findQuery is one shape of GET /v1/tasks the workload times.
type findQuery struct {
	name   string
	filter client.TaskFilter
}

// findQueries are the shapes timed, one per index path of the list and
// the ones that filter outside it; created ranges fall three days back.
func findQueries(now time.Time) []findQuery {
	from := now.Add(-3 * 24 * time.Hour).UTC()
	hour := func(t time.Time) string { return t.Format(time.RFC3339) }
	return []findQuery{
		{"newest", client.TaskFilter{}},
		{"type", client.TaskFilter{Type: "find.t3"}},
		{"status", client.TaskFilter{Status: "FAILED"}},
		{"status_type", client.TaskFilter{Status: "SUCCESS", Type: "find.t7"}},
		{"rare_status_type", client.TaskFilter{Status: "CANCELLED", Type: "find.t1"}},
		{"type_hour", client.TaskFilter{Type: "find.t5", CreatedAfter: hour(from), CreatedBefore: hour(from.Add(time.Hour))}},
		{"status_hour", client.TaskFilter{Status: "SUCCESS", CreatedAfter: hour(from), CreatedBefore: hour(from.Add(time.Hour))}},
		{"biz_key", client.TaskFilter{Type: "find.t0", BizKey: "order-12"}},
	}
}

// find seeds FindN tasks, starts ax on them (retention off, so nothing is
// pruned meanwhile) and times the list and the stats through the API, then
// the web console's pages (timeConsole).
func find(ctx context.Context, cfg *Config, label string) ([]Metric, error) {
	if cfg.Remote() {
		return nil, errors.New("the find workload needs local mode: it seeds the database before ax starts")
	}
	c := *cfg
	now := time.Now()
	c.seed = func(ctx context.Context, dsn string) error { return seedFind(ctx, dsn, cfg.FindN, now, cfg.Logger) }
	c.axArgs = []string{"--retain-success", "0", "--retain-cancelled", "0", "--retain-failed", "0"}
	return withRun(ctx, &c, label, cfg.CPUProfileDir != "", func(r *run, ctx context.Context) ([]Metric, error) {
		return r.timeFind(ctx, now)
	})
}

// timeFind calls each query shape findCalls times (first page), walks
// findPages pages of the largest state, and reads the stats once cold.
func (r *run) timeFind(ctx context.Context, now time.Time) ([]Metric, error) {
	out := []Metric{{Name: "seeded", Value: float64(r.cfg.FindN)}}
	timed := func(call func() error) (float64, error) {
		t0 := time.Now()
		err := call()
		return ms(time.Since(t0).Nanoseconds()), err
	}
	for _, q := range findQueries(now) {
		samples := make([]float64, 0, findCalls)
		found := 0
		for range findCalls {
			d, err := timed(func() error {
				l, err := r.api.ListTasks(ctx, q.filter, findPageLen, "")
				if err == nil {
					found = len(l.Tasks)
				}
				return err
			})
			if err != nil {
				return out, fmt.Errorf("list %s: %w", q.name, err)
			}
			samples = append(samples, d)
		}
		r.logger.Info("find query timed", "query", q.name, "tasks_per_page", found)
		out = append(out, latencyMetrics("list_"+q.name, samples, 50, 99)...)
	}
	for _, q := range findWorkflowQueries {
		samples := make([]float64, 0, findCalls)
		for range findCalls {
			d, err := timed(func() error {
				_, err := r.api.ListWorkflows(ctx, q.filter, findPageLen, "")
				return err
			})
			if err != nil {
				return out, fmt.Errorf("list workflows %s: %w", q.name, err)
			}
			samples = append(samples, d)
		}
		out = append(out, latencyMetrics("list_workflows_"+q.name, samples, 50, 99)...)
	}
	var pages []float64
	cursor := ""
	for range findPages {
		d, err := timed(func() error {
			l, err := r.api.ListTasks(ctx, client.TaskFilter{Status: "SUCCESS"}, findPageLen, cursor)
			if err == nil {
				cursor = l.NextCursor
			}
			return err
		})
		if err != nil {
			return out, fmt.Errorf("walk pages: %w", err)
		}
		pages = append(pages, d)
	}
	out = append(out, latencyMetrics("list_page_walk", pages, 50, 99)...)
	cold, err := timed(func() error { _, err := r.api.Stats(ctx); return err })
	if err != nil {
		return out, fmt.Errorf("stats: %w", err)
	}
	cached, err := timed(func() error { _, err := r.api.Stats(ctx); return err })
	out = append(out, Metric{Name: "stats_cold_ms", Value: cold}, Metric{Name: "stats_cached_ms", Value: cached})
	if err != nil {
		return out, err
	}
	console, err := r.timeConsole(ctx)
	return append(out, console...), err
}

// seedFind writes n tasks with snowflake IDs of creation times spread over
// the findSpan before now, in multi-row INSERTs straight into MySQL. Every
// tenth task has a business key. No history rows: lists do not read them.
func seedFind(ctx context.Context, dsn string, n int, now time.Time, logger interface{ Info(string, ...any) }) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return fmt.Errorf("open mysql: %w", err)
	}
	defer db.Close()
	t0 := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(seedWorkers)
	for from := 0; from < n; from += seedChunk {
		to := min(from+seedChunk, n)
		g.Go(func() error { return seedFindChunk(gctx, db, from, to, n, now) })
	}
	workflows := n / findWorkflowsPer
	for from := 0; from < workflows; from += seedChunk {
		to := min(from+seedChunk, workflows)
		g.Go(func() error { return seedFindWorkflows(gctx, db, from, to, workflows, now) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	logger.Info("seeded tasks and workflows to find", "tasks", n, "workflows", workflows, "took", time.Since(t0).Round(time.Millisecond))
	return nil
}

// seedFindWorkflows writes workflows from..to of n, created over the
// findSpan like the tasks, without steps: the lists read only their rows.
func seedFindWorkflows(ctx context.Context, db *sql.DB, from, to, n int, now time.Time) error {
	return seedRows(ctx, db, "workflows",
		`INSERT INTO workflows (id, name, biz_key, status, reason, open_steps, created_at, updated_at) VALUES `,
		from, to, n, now, findWorkflowStates, 11, func(b *strings.Builder, r seeded) {
			fmt.Fprintf(b, "(%d,'find.w%d',%s,'%s','seeded',0,%s,%s)", r.id, r.i%4, r.key, r.status, r.at, r.at)
		})
}

func seedFindChunk(ctx context.Context, db *sql.DB, from, to, n int, now time.Time) error {
	return seedRows(ctx, db, "tasks", `INSERT INTO tasks (id, task_type, priority, biz_key, status, next_run_time, attempt,
		max_retry_count, timeout_ms, executor_addr, created_at, updated_at) VALUES `,
		from, to, n, now, findStates, 7, func(b *strings.Builder, r seeded) {
			fmt.Fprintf(b, "(%d,'find.t%d',1,%s,'%s',%d,1,3,300000,'bench-seed-%d',%s,%s)",
				r.id, r.i%findTypes, r.key, r.status, r.created.UnixMilli(), r.i%4, r.at, r.at)
		})
}

// seeded is one seeded row: its index, ID and creation time (seedRow),
// state drawn from the mix, business key (every tenth row; SQL NULL
// otherwise) and creation time as a SQL literal.
type seeded struct {
	i               int
	id              int64
	created         time.Time
	status, key, at string
}

// seedRows writes rows from..to of n of table in one multi-row INSERT:
// head, then each row's values as values writes them.
func seedRows(ctx context.Context, db *sql.DB, table, head string, from, to, n int, now time.Time,
	states stateMix, stream uint64, values func(*strings.Builder, seeded)) error {
	rng := rand.New(rand.NewPCG(uint64(from), stream))
	var b strings.Builder
	b.WriteString(head)
	for i := from; i < to; i++ {
		r := seeded{i: i, status: states.pick(rng), key: "NULL"}
		r.created, r.id = seedRow(now, i, n)
		if i%10 == 0 {
			r.key = fmt.Sprintf("'order-%d'", i/10)
		}
		r.at = "'" + r.created.UTC().Format("2006-01-02 15:04:05.000") + "'"
		if i > from {
			b.WriteByte(',')
		}
		values(&b, r)
	}
	if _, err := db.ExecContext(ctx, b.String()); err != nil {
		return fmt.Errorf("seed %s %d..%d: %w", table, from, to, err)
	}
	return nil
}
