package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// Where a workflow's steps are listed (migration 0021): a workflow without
// compensations lists them on its own row (workflows.steps, JSON), one
// with compensations in workflow_steps, a row per step, which also records
// each step's final state for the choice of compensations. The first costs
// its creation one row instead of one per step more, and its steps' ends
// write nothing but their tasks and the workflow's count. Every reader
// goes through stepsOf, which reads either.
//
// A workflow listed on its row whose steps each have at most one parent (a
// tree, such as a chain) also counts only the ends of its steps without
// children (leaves) in open_steps: every step of a tree is an ancestor of
// a leaf, and a leaf ends only after its ancestors have (it runs once they
// have ended, and is cancelled only when its one parent ended otherwise
// than it waits for), so its last leaf ends it. A chain's first step then
// ends without touching its workflow's row. A step cancelled by hand ends
// out of turn: countAheadOfCancelled then counts every step still open.
// open_steps, as the API shows it, is counted from the steps' tasks when
// read (openStepCounts).

// listedStep is a step as workflows.steps lists it.
type listedStep struct {
	Key    string `json:"key"`
	TaskID int64  `json:"task"`
}

// stepRef is a step wherever it is listed, in position order.
type stepRef struct {
	Key    string
	TaskID int64
	// CompTaskID is its compensation's task, 0 without one.
	CompTaskID int64
}

// listsStepsOnRow reports whether nw is created with its steps on its own
// row: it has no compensations and the store was not told to keep every
// workflow's steps in workflow_steps (Options.StepsInTable).
func (s *Store) listsStepsOnRow(nw NewWorkflow) bool {
	return !s.stepsInTable && workflowTaskCount(nw) == len(nw.Steps)
}

// countsLeavesOnly reports whether a workflow listed on its row counts
// only its leaves' ends: each of its steps has at most one parent.
func countsLeavesOnly(nw NewWorkflow) bool {
	for _, st := range nw.Steps {
		if len(st.Task.Parents) > 1 {
			return false
		}
	}
	return true
}

// parentsInWorkflow is the set of nw's step tasks that are another step's
// parent.
func parentsInWorkflow(nw NewWorkflow) map[int64]bool {
	out := make(map[int64]bool, len(nw.Steps))
	for _, st := range nw.Steps {
		for _, p := range st.Task.Parents {
			out[p.ParentID] = true
		}
	}
	return out
}

// encodeSteps is nw's steps as workflows.steps lists them.
func encodeSteps(nw NewWorkflow) (string, error) {
	list := make([]listedStep, len(nw.Steps))
	for i, st := range nw.Steps {
		list[i] = listedStep{Key: st.Key, TaskID: st.Task.ID}
	}
	b, err := json.Marshal(list)
	if err != nil {
		return "", fmt.Errorf("list the steps of workflow %d: %w", nw.ID, err)
	}
	return string(b), nil
}

func decodeSteps(wf int64, text string) ([]stepRef, error) {
	var list []listedStep
	if err := json.Unmarshal([]byte(text), &list); err != nil {
		return nil, fmt.Errorf("the steps of workflow %d: %w", wf, err)
	}
	out := make([]stepRef, len(list))
	for i, l := range list {
		out[i] = stepRef{Key: l.Key, TaskID: l.TaskID}
	}
	return out, nil
}

// rowQuerier is a pool or a transaction.
type rowQuerier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// stepsOf returns the steps of workflow wf in position order, wherever
// they are listed, and whether they are listed on its row. A workflow
// that does not exist has none.
func stepsOf(ctx context.Context, q rowQuerier, wf int64) ([]stepRef, bool, error) {
	var text sql.NullString
	err := q.QueryRowContext(ctx, `SELECT steps FROM workflows WHERE id = ?`, wf).Scan(&text)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("steps of workflow %d: %w", wf, err)
	}
	if text.Valid {
		steps, err := decodeSteps(wf, text.String)
		return steps, true, err
	}
	rows, err := q.QueryContext(ctx, `SELECT step_key, task_id, COALESCE(compensation_task_id, 0) FROM workflow_steps
		WHERE workflow_id = ? ORDER BY position`, wf)
	if err != nil {
		return nil, false, fmt.Errorf("steps of workflow %d: %w", wf, err)
	}
	defer rows.Close()
	var out []stepRef
	for rows.Next() {
		var r stepRef
		if err := rows.Scan(&r.Key, &r.TaskID, &r.CompTaskID); err != nil {
			return nil, false, fmt.Errorf("steps of workflow %d: %w", wf, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("steps of workflow %d: %w", wf, err)
	}
	return out, false, nil
}

// stepTaskIDs lists the tasks of steps, then of their compensations.
func stepTaskIDs(steps []stepRef) []int64 {
	out := make([]int64, 0, len(steps))
	for _, st := range steps {
		out = append(out, st.TaskID)
	}
	for _, st := range steps {
		if st.CompTaskID != 0 {
			out = append(out, st.CompTaskID)
		}
	}
	return out
}

// listedStepKeys returns the keys of the tasks ids that are steps listed
// on their workflows' rows (role bit roleListed), by task ID.
func listedStepKeys(ctx context.Context, q rowQuerier, ids []int64) (map[int64]string, error) {
	out := map[int64]string{}
	if len(ids) == 0 {
		return out, nil
	}
	wfs, err := queryIDs(ctx, q.QueryContext, `SELECT DISTINCT workflow_id FROM tasks FORCE INDEX (PRIMARY)
		WHERE id IN (`+marks(len(ids))+`) AND workflow_role & ? <> 0 AND workflow_id IS NOT NULL`, append(int64Args(ids), roleListed)...)
	if err != nil {
		return nil, fmt.Errorf("workflows of steps: %w", err)
	}
	for _, wf := range wfs {
		steps, _, err := stepsOf(ctx, q, wf)
		if err != nil {
			return nil, err
		}
		for _, st := range steps {
			if slices.Contains(ids, st.TaskID) {
				out[st.TaskID] = st.Key
			}
		}
	}
	return out, nil
}

// openStepCounts counts, for each workflow listed on its row among wfs,
// its steps whose tasks have not ended: what open_steps says of a
// workflow with its steps in workflow_steps, which one listed on its row
// may count otherwise (leaves only).
func (s *Store) openStepCounts(ctx context.Context, wfs []int64) (map[int64]int, error) {
	out := make(map[int64]int, len(wfs))
	if len(wfs) == 0 {
		return out, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id, steps FROM workflows FORCE INDEX (PRIMARY) WHERE id IN (`+marks(len(wfs))+`) AND steps IS NOT NULL`,
		int64Args(wfs)...)
	if err != nil {
		return nil, fmt.Errorf("steps of %d workflow(s): %w", len(wfs), err)
	}
	var ids []int64
	for rows.Next() {
		var wf int64
		var text string
		if err := rows.Scan(&wf, &text); err != nil {
			rows.Close()
			return nil, fmt.Errorf("steps of %d workflow(s): %w", len(wfs), err)
		}
		steps, err := decodeSteps(wf, text)
		if err != nil {
			rows.Close()
			return nil, err
		}
		out[wf] = 0
		ids = append(ids, stepTaskIDs(steps)...)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("steps of %d workflow(s): %w", len(wfs), err)
	}
	for chunk := range slices.Chunk(ids, batchChunkRows) {
		r, err := s.db.QueryContext(ctx, `SELECT workflow_id, COUNT(*) FROM tasks FORCE INDEX (PRIMARY) WHERE id IN (`+marks(len(chunk))+`)
			AND status NOT IN (`+marks(len(finalStateArgs))+`) GROUP BY workflow_id`, append(int64Args(chunk), finalStateArgs...)...)
		if err != nil {
			return nil, fmt.Errorf("count open steps: %w", err)
		}
		for r.Next() {
			var wf sql.NullInt64
			var n int
			if err := r.Scan(&wf, &n); err != nil {
				r.Close()
				return nil, fmt.Errorf("count open steps: %w", err)
			}
			if _, ok := out[wf.Int64]; ok && wf.Valid {
				out[wf.Int64] += n
			}
		}
		r.Close()
		if err := r.Err(); err != nil {
			return nil, fmt.Errorf("count open steps: %w", err)
		}
	}
	return out, nil
}

// stepStates fills the task type and state of steps listed on a row; a
// step whose task retention deleted is left out, as the join on
// workflow_steps leaves it out.
func (s *Store) stepStates(ctx context.Context, refs []stepRef) ([]WorkflowStep, error) {
	ids := make([]int64, len(refs))
	for i, r := range refs {
		ids[i] = r.TaskID
	}
	tasks, err := s.tasksByIDs(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make([]WorkflowStep, 0, len(refs))
	for _, r := range refs {
		if t, ok := tasks[r.TaskID]; ok {
			out = append(out, WorkflowStep{Key: r.Key, TaskID: r.TaskID, Type: t.Type, Status: t.Status})
		}
	}
	return out, nil
}
