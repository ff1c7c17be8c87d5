package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/axsched/ax/contracts"
)

// Retention: deleting finished tasks with their history and dead letters.
//
// A task is due for deletion when it is in a final state and its end time,
// updated_at (stamped by the final transfer on the database clock), is
// older than the cutoff. Candidates are found through
// idx_tasks_status_next_run, the one index on status, rather than a new
// index on (status, updated_at): every secondary index holding status costs
// every transfer an entry moved. For a final task next_run_time is the due
// time of its last attempt, which is never after its end, so
// next_run_time < cutoff is implied by an end before the cutoff and narrows
// the scan to an index range; updated_at < cutoff then decides. The two
// clocks (next_run_time is on the scheduler clock) only have to agree
// roughly: a skew delays a deletion by the skew, it never makes one early,
// since updated_at always decides. A task cancelled before it was due keeps
// its future next_run_time, so it is deleted a retention after its due time
// (at most the submit horizon, a year) rather than after its cancellation.

// FinalStates are the states retention deletes, each with its own
// retention setting. FAILED and TIMEOUT rows that are final are dead
// letters: a failure with retries left moves on to RETRYING in the same
// transaction, so it is never seen final.
var FinalStates = []contracts.Status{
	contracts.StatusSuccess, contracts.StatusCancelled, contracts.StatusFailed, contracts.StatusTimeout,
}

// PruneFinishedParams select one batch of finished tasks to delete.
type PruneFinishedParams struct {
	// Status is the final state whose tasks go.
	Status contracts.Status
	// EndedBefore is the cutoff on the database clock (see DBNow): only
	// tasks whose final transfer was before it go.
	EndedBefore time.Time
	// Limit bounds the tasks of the batch, so one transaction holds few
	// locks for a short time.
	Limit int
	// DueFrom starts the scan at this next_run_time: a pass gives each
	// batch the previous batch's LastDue, so it does not walk again over
	// the index entries it just deleted (InnoDB purges them only later).
	DueFrom int64
}

// PruneCounts are the rows one batch deleted.
type PruneCounts struct {
	Tasks, History, DeadLetters int64
	// Workflows counts the ended workflows whose last task this batch
	// deleted: they go with it (deleteEndedWorkflows).
	Workflows int64
	// Candidates is how many tasks the index scan found; fewer than the
	// limit means the state has nothing more due.
	Candidates int
	// LastDue is the latest next_run_time among the candidates: where the
	// next batch's scan starts.
	LastDue int64
}

// DBNow reads the database clock, the one updated_at is stamped with.
func (s *Store) DBNow(ctx context.Context) (time.Time, error) {
	var now time.Time
	if err := s.db.QueryRowContext(ctx, `SELECT NOW(3)`).Scan(&now); err != nil {
		return time.Time{}, fmt.Errorf("read database clock: %w", err)
	}
	return now.UTC(), nil
}

// pruneCandidatesSQL scans one status's range of idx_tasks_status_next_run
// oldest due time first; the index is forced because on a table of mostly
// old finished tasks the range covers most rows and the optimizer would
// otherwise rather read the whole table.
const pruneCandidatesSQL = `SELECT id, next_run_time FROM tasks FORCE INDEX (idx_tasks_status_next_run)
	WHERE status = ? AND next_run_time >= ? AND next_run_time < ? AND updated_at < ?
	ORDER BY next_run_time LIMIT ?`

// PruneFinished deletes one batch of tasks of p.Status that ended before
// p.EndedBefore, with their task_history and dead_letters rows, in one
// transaction, and returns what went.
//
// Nothing that can still change is deleted: inside the transaction the
// dead letters and then the tasks are locked (the order RetryDeadLetter
// takes them in, so the two cannot deadlock) and the state and end time
// re-checked, so a dead letter re-run concurrently (FAILED -> RETRYING) is
// left whole. A task whose history rows are not all published yet (above
// the history relay's cursor) is left for a later batch, so deleting never
// loses an event. READ COMMITTED keeps the locks to the rows themselves,
// without gap locks that would stall inserts of new dead letters.
func (s *Store) PruneFinished(ctx context.Context, p PruneFinishedParams) (PruneCounts, error) {
	if !slices.Contains(FinalStates, p.Status) {
		return PruneCounts{}, fmt.Errorf("prune finished tasks: %s is not a final state", p.Status)
	}
	if p.Limit <= 0 || p.EndedBefore.IsZero() {
		return PruneCounts{}, fmt.Errorf("prune finished tasks: limit %d must be positive and the cutoff set", p.Limit)
	}
	cutoff := p.EndedBefore.UTC()
	ids, lastDue, err := s.pruneCandidates(ctx, p.Status, p.DueFrom, cutoff, p.Limit)
	if err != nil {
		return PruneCounts{}, fmt.Errorf("find %s tasks ended before %s: %w", p.Status, cutoff.Format(time.RFC3339), err)
	}
	out := PruneCounts{Candidates: len(ids), LastDue: lastDue}
	if len(ids) == 0 {
		return out, nil
	}
	published, err := s.RelayCursor(ctx)
	if err != nil {
		return out, err
	}
	err = s.inTxOpts(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, func(tx *sql.Tx) error {
		if _, err := queryIDs(ctx, tx.QueryContext, `SELECT id FROM dead_letters WHERE task_id IN (`+marks(len(ids))+`) FOR UPDATE`, int64Args(ids)...); err != nil {
			return fmt.Errorf("lock dead letters: %w", err)
		}
		locked, err := queryIDs(ctx, tx.QueryContext, `SELECT id FROM tasks WHERE id IN (`+marks(len(ids))+`) AND status = ? AND updated_at < ? FOR UPDATE`,
			append(int64Args(ids), string(p.Status), cutoff)...)
		if err != nil {
			return fmt.Errorf("lock tasks: %w", err)
		}
		if locked, err = withoutUnpublished(ctx, tx, locked, published); err != nil || len(locked) == 0 {
			return err
		}
		return deletePruned(ctx, tx, p.Status, locked, &out)
	})
	if err != nil {
		return PruneCounts{}, fmt.Errorf("prune %d %s tasks: %w", len(ids), p.Status, err)
	}
	return out, nil
}

// pruneCandidates returns the IDs of a batch and the latest due time among
// them.
func (s *Store) pruneCandidates(ctx context.Context, status contracts.Status, dueFrom int64, cutoff time.Time, limit int) ([]int64, int64, error) {
	rows, err := s.db.QueryContext(ctx, pruneCandidatesSQL, string(status), dueFrom, cutoff.UnixMilli(), cutoff, limit)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var ids []int64
	var last int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id, &last); err != nil {
			return nil, 0, err
		}
		ids = append(ids, id)
	}
	return ids, last, rows.Err()
}

// withoutUnpublished drops the tasks that have a history row above the
// relay's cursor: their events are not all on the stream yet.
func withoutUnpublished(ctx context.Context, tx *sql.Tx, ids []int64, published int64) ([]int64, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	pending, err := queryIDs(ctx, tx.QueryContext, `SELECT DISTINCT task_id FROM task_history WHERE task_id IN (`+marks(len(ids))+`) AND id > ?`,
		append(int64Args(ids), published)...)
	if err != nil {
		return nil, fmt.Errorf("check history is published: %w", err)
	}
	if len(pending) == 0 {
		return ids, nil
	}
	skip := make(map[int64]bool, len(pending))
	for _, id := range pending {
		skip[id] = true
	}
	kept := ids[:0]
	for _, id := range ids {
		if !skip[id] {
			kept = append(kept, id)
		}
	}
	return kept, nil
}

// deletePruned deletes the locked tasks' dead letters, history and rows;
// the task DELETE re-checks the state although the rows are locked, so a
// mistake upstream can never delete live work.
func deletePruned(ctx context.Context, tx *sql.Tx, status contracts.Status, ids []int64, out *PruneCounts) error {
	in, args := marks(len(ids)), int64Args(ids)
	// Read before the tasks go: only their rows name these workflows.
	listed, err := queryIDs(ctx, tx.QueryContext, `SELECT DISTINCT workflow_id FROM tasks FORCE INDEX (PRIMARY) WHERE id IN (`+in+`)
		AND workflow_id IS NOT NULL AND workflow_role & ? <> 0`, append(slices.Clone(args), roleListed)...)
	if err != nil {
		return fmt.Errorf("find the workflows of pruned tasks: %w", err)
	}
	var edges int64
	steps := []struct {
		table string
		query string
		args  []any
		n     *int64
	}{
		{"dead_letters", `DELETE FROM dead_letters WHERE task_id IN (` + in + `)`, args, &out.DeadLetters},
		{"task_history", `DELETE FROM task_history WHERE task_id IN (` + in + `)`, args, &out.History},
		// A final task's edges are settled: its children were judged when
		// it ended, and it was judged before it ran.
		{"task_dependencies", `DELETE FROM task_dependencies WHERE child_id IN (` + in + `)`, args, &edges},
		{"task_dependencies", `DELETE FROM task_dependencies WHERE parent_id IN (` + in + `)`, args, &edges},
		{"tasks", `DELETE FROM tasks WHERE id IN (` + in + `) AND status = ?`, append(args, string(status)), &out.Tasks},
	}
	for _, st := range steps {
		res, err := tx.ExecContext(ctx, st.query, st.args...)
		if err != nil {
			return fmt.Errorf("delete from %s: %w", st.table, err)
		}
		if *st.n, err = res.RowsAffected(); err != nil {
			return fmt.Errorf("delete from %s: %w", st.table, err)
		}
	}
	n, err := deleteEndedWorkflows(ctx, tx, ids, listed)
	out.Workflows = n
	return err
}

// deleteEndedWorkflows deletes the workflows of the tasks ids (just
// deleted) that have ended and have no task left: a workflow goes with the
// last of its steps and compensations, whose retentions may differ, and
// its biz_key is free again, as a task's is once it is deleted. Until then
// its view lists the steps still stored. Nothing adds a task to an
// existing workflow, and an ended one never runs again, so a workflow
// found without tasks stays so. listed are the workflows of ids that list
// their steps on their rows (deletePruned reads them before the tasks
// go); the others are found in workflow_steps.
func deleteEndedWorkflows(ctx context.Context, tx *sql.Tx, ids, listed []int64) (int64, error) {
	in, args := marks(len(ids)), int64Args(ids)
	wfs, err := queryIDs(ctx, tx.QueryContext, `SELECT workflow_id FROM workflow_steps WHERE task_id IN (`+in+`)
		UNION SELECT workflow_id FROM workflow_steps WHERE compensation_task_id IN (`+in+`)`, append(args, args...)...)
	if err != nil {
		return 0, wrapIf(err, "find the workflows of pruned tasks")
	}
	ended := endedWorkflowStates
	var gone []int64
	if len(wfs) > 0 {
		gone, err = queryIDs(ctx, tx.QueryContext, `SELECT w.id FROM workflows w WHERE w.id IN (`+marks(len(wfs))+`)
			AND w.status IN (`+marks(len(ended))+`)
			AND NOT EXISTS (SELECT 1 FROM workflow_steps ws JOIN tasks t ON t.id = ws.task_id WHERE ws.workflow_id = w.id)
			AND NOT EXISTS (SELECT 1 FROM workflow_steps ws JOIN tasks t ON t.id = ws.compensation_task_id WHERE ws.workflow_id = w.id)
			ORDER BY w.id`, append(int64Args(wfs), ended...)...)
		if err != nil {
			return 0, wrapIf(err, "find ended workflows without tasks")
		}
	}
	if len(gone) > 0 {
		if err := execIn(ctx, tx, `DELETE FROM workflow_steps WHERE workflow_id IN `, gone); err != nil {
			return 0, fmt.Errorf("delete from workflow_steps: %w", err)
		}
	}
	emptied, err := listedWithoutTasks(ctx, tx, listed)
	if err != nil {
		return 0, err
	}
	gone = append(gone, emptied...)
	if len(gone) == 0 {
		return 0, nil
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM workflows WHERE id IN (`+marks(len(gone))+`) AND status IN (`+marks(len(ended))+`)`,
		append(int64Args(gone), ended...)...)
	if err != nil {
		return 0, fmt.Errorf("delete from workflows: %w", err)
	}
	return res.RowsAffected()
}

// listedWithoutTasks returns those of the workflows wfs, which list their
// steps on their rows, that have ended and have no step task left.
func listedWithoutTasks(ctx context.Context, tx *sql.Tx, wfs []int64) ([]int64, error) {
	if len(wfs) == 0 {
		return nil, nil
	}
	ended := endedWorkflowStates
	rows, err := tx.QueryContext(ctx, `SELECT id, steps FROM workflows FORCE INDEX (PRIMARY) WHERE id IN (`+marks(len(wfs))+`)
		AND status IN (`+marks(len(ended))+`) AND steps IS NOT NULL ORDER BY id`, append(int64Args(wfs), ended...)...)
	if err != nil {
		return nil, fmt.Errorf("find ended workflows without tasks: %w", err)
	}
	var endedWFs []int64
	var steps []int64
	for rows.Next() {
		var wf int64
		var text string
		if err := rows.Scan(&wf, &text); err != nil {
			rows.Close()
			return nil, fmt.Errorf("find ended workflows without tasks: %w", err)
		}
		refs, err := decodeSteps(wf, text)
		if err != nil {
			rows.Close()
			return nil, err
		}
		endedWFs = append(endedWFs, wf)
		steps = append(steps, stepTaskIDs(refs)...)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("find ended workflows without tasks: %w", err)
	}
	// The tasks still stored name their workflows.
	left := map[int64]bool{}
	for chunk := range slices.Chunk(steps, batchChunkRows) {
		wfs, err := queryIDs(ctx, tx.QueryContext, `SELECT DISTINCT workflow_id FROM tasks FORCE INDEX (PRIMARY)
			WHERE id IN (`+marks(len(chunk))+`) AND workflow_id IS NOT NULL`, int64Args(chunk)...)
		if err != nil {
			return nil, fmt.Errorf("find ended workflows without tasks: %w", err)
		}
		for _, wf := range wfs {
			left[wf] = true
		}
	}
	return slices.DeleteFunc(endedWFs, func(wf int64) bool { return left[wf] }), nil
}

// endedWorkflowStates are the final workflow states, as query arguments.
var endedWorkflowStates = func() []any {
	var out []any
	for _, st := range contracts.WorkflowStatuses {
		if st.Final() {
			out = append(out, string(st))
		}
	}
	return out
}()

// wrapIf wraps err with what, or returns nil.
func wrapIf(err error, what string) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", what, err)
}

// queryIDs runs a query of one BIGINT column through query, the pool's or
// a transaction's QueryContext.
func queryIDs(ctx context.Context, query func(context.Context, string, ...any) (*sql.Rows, error), q string, args ...any) ([]int64, error) {
	rows, err := query(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

// marks is n comma-separated placeholders.
func marks(n int) string { return "?" + strings.Repeat(", ?", n-1) }

func int64Args(ids []int64) []any {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	return args
}
