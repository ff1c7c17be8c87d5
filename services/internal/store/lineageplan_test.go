package store_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestLineageReadsThroughIndexes: lineage's reads of a 1,000-step
// workflow's edges and histories go through their indexes however many
// other workflows came before. Planned with statistics older than a burst
// of 70,000 chains, MariaDB walked every edge and every history row, and a
// lineage answer grew with every workflow ever run (180 ms for 1,000
// steps, against 25 ms through the indexes).
func TestLineageReadsThroughIndexes(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	// A workflow of 1,000 steps (a root and its 999 children), workflow 0,
	// then what saturated chains leave behind: 60,000 workflows of two.
	const chains, steps = 60_000, 1000
	var edges, stepRows []string
	var args, stepArgs []any
	flush := func() {
		if len(edges) == 0 {
			return
		}
		_, err := st.DB().ExecContext(ctx, `INSERT INTO task_dependencies (parent_id, child_id, cond) VALUES `+strings.Join(edges, ","), args...)
		require.NoError(t, err)
		_, err = st.DB().ExecContext(ctx, `INSERT INTO workflow_steps (workflow_id, step_key, position, task_id) VALUES `+strings.Join(stepRows, ","), stepArgs...)
		require.NoError(t, err)
		edges, stepRows, args, stepArgs = edges[:0], stepRows[:0], args[:0], stepArgs[:0]
	}
	step := func(wf int, key string, pos int, id int64) {
		stepRows = append(stepRows, "(?, ?, ?, ?)")
		stepArgs = append(stepArgs, wf, key, pos, id)
	}
	step(0, "root", 0, 1)
	for i := 1; i < steps; i++ {
		step(0, "s"+strconv.Itoa(i), i, int64(1+i))
		edges = append(edges, "(?, ?, 'success')")
		args = append(args, 1, int64(1+i))
	}
	flush()
	// The statistics MariaDB plans with are a table's at some moment;
	// these are taken before the chains come, as after a burst.
	for _, q := range []string{`ANALYZE TABLE task_dependencies, workflow_steps`,
		`ALTER TABLE task_dependencies STATS_AUTO_RECALC = 0`, `ALTER TABLE workflow_steps STATS_AUTO_RECALC = 0`} {
		_, err := st.DB().ExecContext(ctx, q)
		require.NoError(t, err)
	}
	for wf := 1; wf <= chains; wf++ {
		a, b := int64(wf)*2+1_000_000, int64(wf)*2+1_000_001
		step(wf, "a", 0, a)
		step(wf, "b", 1, b)
		edges = append(edges, "(?, ?, 'success')")
		args = append(args, a, b)
		if len(edges) == 1000 {
			flush()
		}
	}
	flush()

	ids := make([]any, 500)
	for i := range ids {
		ids[i] = int64(2 + i)
	}
	marks := "(" + strings.TrimSuffix(strings.Repeat("?,", len(ids)), ",") + ")"
	for name, q := range map[string]struct {
		sql  string
		args []any
	}{
		"edges into":   {store.EdgesIntoSQL + marks, ids},
		"histories":    {store.HistoriesOfSQL + marks + " AND rejected = 0 ORDER BY task_id, id", ids},
		"edges around": {store.EdgesAroundSQL(store.DivedRanges), append(append([]any{}, ids[:store.DivedRanges]...), ids[:store.DivedRanges]...)},
		"step edges":   {store.StepEdgesSQL, []any{0}},
	} {
		plan := explain(t, st, q.sql, q.args...)
		require.NotEmpty(t, plan, name)
		for _, row := range plan {
			if row["table"] == "d" || row["table"] == "ws" || row["table"] == "task_dependencies" || row["table"] == "task_history" {
				require.NotContains(t, []string{"ALL", "index"}, row["type"], "%s: no walk of a whole index or table: %v", name, row)
			}
		}
	}
}
