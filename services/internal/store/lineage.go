package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"

	"github.com/axsched/ax/contracts"
)

// Lineage bounds: the tasks of one answer (a workflow has at most 1,000
// steps and as many compensations) and the lineages of one business key.
const (
	maxLineageTasks    = 2 * contracts.MaxWorkflowSteps
	maxBizKeyLineages  = 20
	maxBizKeyTaskMatch = 100
)

// TaskLineage returns the whole chain around task id: its workflow's tasks
// when it is a step or a compensation, otherwise the tasks reachable from
// it through dependencies either way, with their attempts and edges.
func (s *Store) TaskLineage(ctx context.Context, id int64) (*contracts.Lineage, error) {
	wf, err := s.WorkflowOf(ctx, id)
	if err != nil {
		return nil, err
	}
	var ids []int64
	if wf != 0 {
		ids, err = s.workflowTaskIDs(ctx, wf)
	} else {
		ids, err = s.reachable(ctx, id)
	}
	if err != nil {
		return nil, err
	}
	return s.lineageOf(ctx, wf, ids, id)
}

// BizKeyLineages returns the lineages of the workflows that have bizKey
// and of the tasks that have it (of taskType only, when it is given), one
// per workflow or chain.
func (s *Store) BizKeyLineages(ctx context.Context, bizKey, taskType string) ([]contracts.Lineage, error) {
	out := []contracts.Lineage{}
	seen := map[string]bool{}
	wfs, err := s.queryInts(ctx, `SELECT id FROM workflows WHERE biz_key = ? ORDER BY id LIMIT ?`, []byte(bizKey), maxBizKeyLineages)
	if err != nil {
		return nil, fmt.Errorf("workflows with biz_key: %w", err)
	}
	for _, wf := range wfs {
		ids, err := s.workflowTaskIDs(ctx, wf)
		if err != nil {
			return nil, err
		}
		l, err := s.lineageOf(ctx, wf, ids, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, *l)
		for _, t := range l.Tasks {
			seen[t.ID] = true
		}
	}
	tasks, err := s.tasksWithBizKey(ctx, bizKey, taskType)
	if err != nil {
		return nil, err
	}
	for _, id := range tasks {
		if seen[strconv.FormatInt(id, 10)] || len(out) >= maxBizKeyLineages {
			continue
		}
		l, err := s.TaskLineage(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, *l)
		for _, t := range l.Tasks {
			seen[t.ID] = true
		}
	}
	return out, nil
}

// tasksWithBizKey finds tasks by key through the (task_type, biz_key)
// unique index, one range per registered type (or the one given), so no
// index on biz_key alone is needed.
func (s *Store) tasksWithBizKey(ctx context.Context, bizKey, taskType string) ([]int64, error) {
	types := []string{taskType}
	if taskType == "" {
		var err error
		if types, err = queryStrings(ctx, s.db, `SELECT name FROM task_types`); err != nil {
			return nil, fmt.Errorf("task types: %w", err)
		}
	}
	if len(types) == 0 {
		return nil, nil
	}
	args := make([]any, 0, len(types)+2)
	for _, t := range types {
		args = append(args, t)
	}
	args = append(args, []byte(bizKey), maxBizKeyTaskMatch)
	ids, err := s.queryInts(ctx, `SELECT id FROM tasks WHERE task_type IN (`+marks(len(types))+`) AND biz_key = ? ORDER BY id LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("tasks with biz_key: %w", err)
	}
	return ids, nil
}

func (s *Store) workflowTaskIDs(ctx context.Context, wf int64) ([]int64, error) {
	steps, _, err := stepsOf(ctx, s.db, wf)
	if err != nil {
		return nil, err
	}
	return stepTaskIDs(steps), nil
}

// divedRanges is MariaDB's eq_range_index_dive_limit, by default: up to
// that many values of an IN list, it counts each one's rows in the index.
const divedRanges = 200

// edgesAroundSQL reads the edges from and into n tasks (their ids twice),
// each through its index. n is at most divedRanges: past it MariaDB
// estimates each id's edges from the index's averages, and a parent of
// many children makes every id look like one, so it would walk the whole
// primary key.
func edgesAroundSQL(n int) string {
	in := `(` + marks(n) + `)`
	return `SELECT parent_id, child_id FROM task_dependencies FORCE INDEX (PRIMARY) WHERE parent_id IN ` + in + `
		UNION SELECT parent_id, child_id FROM task_dependencies FORCE INDEX (idx_task_dependencies_child) WHERE child_id IN ` + in
}

// reachable walks dependencies from id both ways, up to maxLineageTasks.
func (s *Store) reachable(ctx context.Context, id int64) ([]int64, error) {
	seen := map[int64]bool{id: true}
	frontier := []int64{id}
	for len(frontier) > 0 && len(seen) < maxLineageTasks {
		var next []int64
		for chunk := range slices.Chunk(frontier, divedRanges) {
			pairs, err := s.edgesAround(ctx, chunk)
			if err != nil {
				return nil, fmt.Errorf("dependencies around task %d: %w", id, err)
			}
			for _, pc := range pairs {
				for _, x := range pc {
					if !seen[x] && len(seen) < maxLineageTasks {
						seen[x] = true
						next = append(next, x)
					}
				}
			}
		}
		frontier = next
	}
	out := make([]int64, 0, len(seen))
	for x := range seen {
		out = append(out, x)
	}
	slices.Sort(out)
	return out, nil
}

func (s *Store) edgesAround(ctx context.Context, ids []int64) ([][2]int64, error) {
	rows, err := s.db.QueryContext(ctx, edgesAroundSQL(len(ids)), append(int64Args(ids), int64Args(ids)...)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out [][2]int64
	for rows.Next() {
		var pc [2]int64
		if err := rows.Scan(&pc[0], &pc[1]); err != nil {
			return nil, err
		}
		out = append(out, pc)
	}
	return out, rows.Err()
}

// lineageOf assembles the lineage of tasks ids (of workflow wf, or 0);
// must, when not 0, has to be among them or the answer is ErrNotFound.
func (s *Store) lineageOf(ctx context.Context, wf int64, ids []int64, must int64) (*contracts.Lineage, error) {
	out := &contracts.Lineage{Tasks: []contracts.LineageTask{}, Edges: []contracts.LineageEdge{}}
	tasks, err := s.tasksByIDs(ctx, ids)
	if err != nil {
		return nil, err
	}
	if _, ok := tasks[must]; must != 0 && !ok {
		return nil, fmt.Errorf("task %d: %w", must, ErrNotFound)
	}
	hist, err := s.histories(ctx, ids)
	if err != nil {
		return nil, err
	}
	steps := map[int64]string{}
	comps := map[int64]string{}
	order := slices.Clone(ids)
	if wf != 0 {
		w, err := s.GetWorkflow(ctx, wf)
		if err != nil {
			return nil, err
		}
		sum := contracts.WorkflowSummary{ID: strconv.FormatInt(w.ID, 10), Name: w.Name, Status: w.Status, Reason: w.Reason}
		if w.BizKey != nil {
			sum.BizKey = *w.BizKey
		}
		out.Workflow = &sum
		order = order[:0]
		for _, st := range w.Steps {
			steps[st.TaskID] = st.Key
			order = append(order, st.TaskID)
		}
		for _, st := range w.Steps {
			if st.CompensationTaskID != 0 {
				comps[st.CompensationTaskID] = st.Key
				order = append(order, st.CompensationTaskID)
			}
		}
	}
	for _, id := range order {
		t, ok := tasks[id]
		if !ok {
			continue // pruned by retention
		}
		out.Tasks = append(out.Tasks, lineageTask(t, hist[id], steps[id], comps[id]))
	}
	edges, err := s.edgesOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	out.Edges = append(out.Edges, edges...)
	return out, nil
}

// lineageTask describes one task and its attempts from its history.
func lineageTask(t *Task, hist []HistoryRow, step, compensates string) contracts.LineageTask {
	lt := t.API()
	out := contracts.LineageTask{ID: lt.ID, Type: t.Type, Status: t.Status, BizKey: lt.BizKey, StepKey: step,
		Compensates: compensates, LastError: t.LastError, CreatedAt: t.CreatedAt, At: t.UpdatedAt}
	for _, h := range hist {
		out.Reason, out.At = h.Reason, h.At
		switch {
		case h.To == contracts.StatusRunning:
			out.Attempts = append(out.Attempts, contracts.LineageAttempt{Attempt: h.Attempt, Node: h.Actor, StartedAt: h.At})
		case h.From == contracts.StatusRunning && len(out.Attempts) > 0:
			a := &out.Attempts[len(out.Attempts)-1]
			at := h.At
			a.EndedAt, a.Outcome, a.Reason = &at, h.To, h.Reason
		}
	}
	return out
}

func (s *Store) tasksByIDs(ctx context.Context, ids []int64) (map[int64]*Task, error) {
	out := make(map[int64]*Task, len(ids))
	for chunk := range slices.Chunk(ids, batchChunkRows) {
		rows, err := s.db.QueryContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id IN (`+marks(len(chunk))+`)`, int64Args(chunk)...)
		if err != nil {
			return nil, fmt.Errorf("load tasks: %w", err)
		}
		for rows.Next() {
			t, err := scanTask(rows)
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("load tasks: %w", err)
			}
			out[t.ID] = t
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("load tasks: %w", err)
		}
	}
	return out, nil
}

// historiesOfSQL reads the history of a list of tasks through its index,
// as edgesIntoSQL reads their edges: planned with statistics taken before
// a burst of tasks, MariaDB read every history row for 500 tasks (80 ms,
// 500,000 rows).
const historiesOfSQL = `SELECT task_id, from_status, to_status, attempt, reason, actor, created_at
	FROM task_history FORCE INDEX (idx_task_history_task) WHERE task_id IN `

// histories reads the transfers of tasks, oldest first, without the
// traces of refused writes.
func (s *Store) histories(ctx context.Context, ids []int64) (map[int64][]HistoryRow, error) {
	out := make(map[int64][]HistoryRow, len(ids))
	for chunk := range slices.Chunk(ids, batchChunkRows) {
		rows, err := s.db.QueryContext(ctx, historiesOfSQL+`(`+marks(len(chunk))+`) AND rejected = 0 ORDER BY task_id, id`, int64Args(chunk)...)
		if err != nil {
			return nil, fmt.Errorf("load histories: %w", err)
		}
		for rows.Next() {
			var id int64
			var h HistoryRow
			var from, to string
			if err := rows.Scan(&id, &from, &to, &h.Attempt, &h.Reason, &h.Actor, &h.At); err != nil {
				rows.Close()
				return nil, fmt.Errorf("load histories: %w", err)
			}
			h.From, h.To = contracts.Status(from), contracts.Status(to)
			out[id] = append(out[id], h)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("load histories: %w", err)
		}
	}
	return out, nil
}

// edgesIntoSQL reads the edges into a list of tasks. Their index is
// named: with hundreds of tasks MariaDB estimates a walk of the whole
// table cheaper than one range each, and lineage would then grow with
// every workflow ever run (100 ms for 1,000 steps among 70,000 edges).
const edgesIntoSQL = `SELECT parent_id, child_id, cond FROM task_dependencies FORCE INDEX (idx_task_dependencies_child) WHERE child_id IN `

func (s *Store) edgesOf(ctx context.Context, ids []int64) ([]contracts.LineageEdge, error) {
	var out []contracts.LineageEdge
	for chunk := range slices.Chunk(ids, batchChunkRows) {
		rows, err := s.db.QueryContext(ctx, edgesIntoSQL+`(`+marks(len(chunk))+`) ORDER BY child_id, parent_id`, int64Args(chunk)...)
		if err != nil {
			return nil, fmt.Errorf("load edges: %w", err)
		}
		for rows.Next() {
			var p, c int64
			var cond string
			if err := rows.Scan(&p, &c, &cond); err != nil {
				rows.Close()
				return nil, fmt.Errorf("load edges: %w", err)
			}
			out = append(out, contracts.LineageEdge{Parent: strconv.FormatInt(p, 10), Child: strconv.FormatInt(c, 10),
				When: contracts.Condition(cond)})
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("load edges: %w", err)
		}
	}
	return out, nil
}

func (s *Store) queryInts(ctx context.Context, q string, args ...any) ([]int64, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return scanIDs(rows)
}

func queryStrings(ctx context.Context, db *sql.DB, q string, args ...any) ([]string, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
