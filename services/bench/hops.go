package bench

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax/services/internal/metrics"
)

// mHop prefixes the per-hop latency of a task due at once:
// hop.<hop>_p50_ms and hop.<hop>_p99_ms for each of metrics.Hops, the
// hops ax_task_hop_seconds times too. The handler's report carries the
// hops up to its start (events.BenchDone); the last, the handler's end to
// its outcome, is read from the outcome's history row.
const mHop = "hop."

// outcomeChunk is how many tasks one query of outcome rows asks for:
// below MariaDB's in_predicate_conversion_threshold (1,000), past which an
// IN list becomes a join against a table of its values, and the query read
// about a hundred history rows for each one it returned.
const outcomeChunk = 500

// hopMetrics summarises, over the first successful run of every task of
// ids, how long each hop took. A hop whose ends were not both recorded
// (a task dispatched by the timer says neither its commit nor its send)
// is left out of that hop's samples.
func (r *run) hopMetrics(ctx context.Context, ids []int64) ([]Metric, error) {
	outcomes, err := outcomeTimes(ctx, r.db, ids)
	samples := make([][]float64, len(metrics.Hops))
	for _, id := range ids {
		runs := r.col.runsOf(id)
		if !runs.hasSucc {
			continue
		}
		d := runs.success
		ends := [][2]int64{{d.CommittedNs, d.SentNs}, {d.SentNs, d.StoredNs}, {d.StoredNs, d.FetchedNs},
			{d.FetchedNs, d.ClaimedNs}, {d.ClaimedNs, d.StartNs}, {d.EndNs, outcomes[id]}}
		for i, e := range ends {
			if e[0] > 0 && e[1] > 0 {
				// Clocks of different processes (and MySQL's): a clock
				// ahead reads as 0, as on /metrics.
				samples[i] = append(samples[i], ms(max(e[1]-e[0], 0)))
			}
		}
	}
	var out []Metric
	for i, hop := range metrics.Hops {
		if len(samples[i]) == 0 {
			continue
		}
		s := sortedCopy(samples[i])
		out = append(out, Metric{Name: mHop + hop + "_p50_ms", Value: Percentile(s, 50)},
			Metric{Name: mHop + hop + "_p99_ms", Value: Percentile(s, 99)})
	}
	return out, err
}

// outcomeTimes reads when the SUCCESS transfer of each task of ids was
// written (its history row's created_at, UTC as ax writes it), in Unix
// nanoseconds.
func outcomeTimes(ctx context.Context, db *sql.DB, ids []int64) (map[int64]int64, error) {
	out := make(map[int64]int64, len(ids))
	for from := 0; from < len(ids); from += outcomeChunk {
		chunk := ids[from:min(from+outcomeChunk, len(ids))]
		var in strings.Builder
		for i, id := range chunk {
			if i > 0 {
				in.WriteByte(',')
			}
			in.WriteString(strconv.FormatInt(id, 10))
		}
		// The index named: planned with statistics from before the run,
		// MariaDB read every history row for each chunk (7 s a run).
		rows, err := db.QueryContext(ctx, `SELECT task_id, DATE_FORMAT(created_at, '%Y-%m-%d %H:%i:%s.%f')
			FROM task_history FORCE INDEX (idx_task_history_task) WHERE task_id IN (`+in.String()+`) AND to_status = 'SUCCESS'`)
		if err != nil {
			return out, fmt.Errorf("read outcome rows: %w", err)
		}
		for rows.Next() {
			var (
				id int64
				at string
			)
			if err := rows.Scan(&id, &at); err != nil {
				rows.Close()
				return out, fmt.Errorf("scan outcome row: %w", err)
			}
			if t, err := time.ParseInLocation("2006-01-02 15:04:05.000000", at, time.UTC); err == nil {
				out[id] = t.UnixNano()
			}
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return out, fmt.Errorf("read outcome rows: %w", err)
		}
	}
	return out, nil
}
