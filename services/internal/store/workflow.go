package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/tracing"
)

// Workflows: a named set of steps, each an ordinary task, created in one
// transaction with their dependencies and their compensations (SUSPEND
// tasks with no parents, started only when needed). The workflow's state
// follows its steps from the final transfers of its tasks, which lock the
// workflow row after their own task rows (tasks first, then the workflow,
// everywhere), so its decisions are serialised and made in the same
// transaction as the outcome that causes them.

// ErrWorkflowFinal: the workflow has ended and cannot be cancelled.
var ErrWorkflowFinal = errors.New("workflow has ended")

// StepTakenError: a step's (type, biz_key) belongs to an existing task,
// which cannot become a step of a new workflow.
type StepTakenError struct {
	Key    string
	TaskID int64
}

func (e *StepTakenError) Error() string {
	return fmt.Sprintf("step %q: task %d has the same type and biz_key already", e.Key, e.TaskID)
}

// NewWorkflow describes a workflow to create.
type NewWorkflow struct {
	ID     int64
	Name   string
	BizKey *string
	// Steps in topological order: a step's Task.Parents name earlier
	// steps' task IDs, and its ID is above theirs.
	Steps []NewWorkflowStep
}

// NewWorkflowStep is one step: its task and, optionally, the task that
// undoes it (created SUSPEND, DAG, without parents; its ID is above every
// step's, and descends with the step's position, so that compensations
// chained in reverse order keep parents below children).
type NewWorkflowStep struct {
	Key          string
	Task         NewTask
	Compensation *NewTask
}

// Workflow is a row of workflows with its steps.
type Workflow struct {
	ID        int64
	Name      string
	BizKey    *string
	Status    contracts.WorkflowStatus
	Reason    string
	CreatedAt time.Time
	UpdatedAt time.Time
	Steps     []WorkflowStep
}

// WorkflowStep is a step as stored, with its task's state.
type WorkflowStep struct {
	Key                string
	TaskID             int64
	Type               string
	Status             contracts.Status
	Parents            []Dependency
	CompensationTaskID int64
	CompensationStatus contracts.Status
}

// API converts the workflow to its public JSON shape.
func (w *Workflow) API() contracts.Workflow {
	out := contracts.Workflow{ID: strconv.FormatInt(w.ID, 10), Name: w.Name, Status: w.Status, Reason: w.Reason,
		CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt, Steps: make([]contracts.WorkflowStepState, len(w.Steps))}
	if w.BizKey != nil {
		out.BizKey = *w.BizKey
	}
	keyOf := make(map[int64]string, len(w.Steps))
	for _, st := range w.Steps {
		keyOf[st.TaskID] = st.Key
	}
	for i, st := range w.Steps {
		s := contracts.WorkflowStepState{Key: st.Key, TaskID: strconv.FormatInt(st.TaskID, 10), Type: st.Type,
			Status: st.Status, CompensationStatus: st.CompensationStatus}
		for _, p := range st.Parents {
			s.DependsOn = append(s.DependsOn, keyOf[p.ParentID])
			s.When = string(p.When)
		}
		if st.CompensationTaskID != 0 {
			s.CompensationTaskID = strconv.FormatInt(st.CompensationTaskID, 10)
		}
		out.Steps[i] = s
	}
	return out
}

// WorkflowResult is what CreateWorkflows did with one NewWorkflow: the
// workflow created, or the existing one with the same name and biz_key
// (Deduplicated, nothing written for it).
type WorkflowResult struct {
	Workflow     *Workflow
	Deduplicated bool
}

// CreateWorkflow creates the workflow, its step tasks, their dependencies
// and their compensations in one transaction. A workflow with the same
// name and biz_key returns the existing one and dedup=true, nothing
// written. A step whose (type, biz_key) is taken fails the whole call with
// a *StepTakenError; an ID collision with ErrIDTaken (retry with new IDs).
func (s *Store) CreateWorkflow(ctx context.Context, nw NewWorkflow) (*Workflow, bool, error) {
	out, err := s.CreateWorkflows(ctx, []NewWorkflow{nw})
	if err != nil {
		return nil, false, err
	}
	return out[0].Workflow, out[0].Deduplicated, nil
}

// CreateWorkflows creates many workflows in one transaction, as
// CreateWorkflow creates one: a commit and a handful of statements for
// all of them instead of for each. The results follow the input order. A
// workflow with the name and biz_key of an existing one, or of an earlier
// one in nws, is deduplicated against it. A step whose (type, biz_key) is
// taken fails the whole call with a *StepTakenError, an ID collision with
// ErrIDTaken; nothing is written then, and the caller retries (each
// workflow alone, for a step taken, so that only its own fails).
func (s *Store) CreateWorkflows(ctx context.Context, nws []NewWorkflow) ([]WorkflowResult, error) {
	if len(nws) == 0 {
		return nil, nil
	}
	if err := checkNewTasks(workflowTasks(nws, nil, s.listsStepsOnRow)); err != nil {
		return nil, err
	}
	// The columns keep milliseconds; the answer says what a read would.
	at, began := s.now().UTC().Truncate(time.Millisecond), time.Now()
	var (
		created map[int64]bool
		out     []BatchResult
		tasks   []NewTask
	)
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		if created, err = insertWorkflowRows(ctx, tx, nws, at, s.listsStepsOnRow); err != nil {
			return err
		}
		tasks = workflowTasks(nws, created, s.listsStepsOnRow)
		if len(tasks) == 0 {
			return nil // every one deduplicated
		}
		var createdTasks map[int64]bool
		if out, createdTasks, err = s.insertTasksTx(ctx, tx, tasks); err != nil {
			return err
		}
		// Before the edges: a step deduplicated against an existing task
		// would leave its children an edge to a task never created.
		if err := insertWorkflowSteps(ctx, tx, nws, created, out, s.listsStepsOnRow); err != nil {
			return err
		}
		return s.linkParents(ctx, tx, tasks, createdTasks)
	})
	if err != nil {
		return nil, fmt.Errorf("create %d workflow(s): %w", len(nws), err)
	}
	if tracing.Enabled() {
		s.traceCreations(ctx, tasks, out, began)
	}
	s.countCreated(out)
	res := make([]WorkflowResult, len(nws))
	k := 0 // the first result of the next created workflow's tasks
	for i, nw := range nws {
		if created[nw.ID] {
			res[i].Workflow = createdWorkflow(nw, out[k:], at)
			k += workflowTaskCount(nw)
			continue
		}
		w, err := s.workflowByBizKey(ctx, nw.Name, *nw.BizKey)
		if err != nil {
			return nil, err
		}
		res[i] = WorkflowResult{Workflow: w, Deduplicated: true}
	}
	return res, nil
}

// workflowTasks lists the tasks of the workflows in created (all of them
// when created is nil): of each, its steps, then its compensations.
// onRow tells the workflows whose steps are listed on their rows.
func workflowTasks(nws []NewWorkflow, created map[int64]bool, onRow func(NewWorkflow) bool) []NewTask {
	var tasks []NewTask
	for _, nw := range nws {
		if created != nil && !created[nw.ID] {
			continue
		}
		role := roleStep
		if workflowTaskCount(nw) == len(nw.Steps) {
			role |= roleUncompensated
		}
		var uncounted map[int64]bool
		if onRow(nw) {
			role |= roleListed
			if countsLeavesOnly(nw) {
				uncounted = parentsInWorkflow(nw)
			}
		}
		for _, st := range nw.Steps {
			st.Task.DAG, st.Task.WorkflowID, st.Task.WorkflowRole = true, nw.ID, role
			if uncounted[st.Task.ID] {
				st.Task.WorkflowRole |= roleUncounted
			}
			tasks = append(tasks, st.Task)
		}
		for _, st := range nw.Steps {
			if st.Compensation != nil {
				c := *st.Compensation
				c.DAG, c.EdgesLater, c.Status = true, true, contracts.StatusSuspend
				c.WorkflowID, c.WorkflowRole = nw.ID, roleCompensation
				tasks = append(tasks, c)
			}
		}
	}
	return tasks
}

func workflowTaskCount(nw NewWorkflow) int {
	n := len(nw.Steps)
	for _, st := range nw.Steps {
		if st.Compensation != nil {
			n++
		}
	}
	return n
}

// insertWorkflowRows inserts the workflows' rows and returns the IDs it
// inserted: a row whose name and biz_key exist already is left out, as
// insertTaskRows leaves out a task whose type and biz_key do, and a
// primary key collision fails with ErrIDTaken. onRow tells the workflows
// whose steps are listed on their rows.
func insertWorkflowRows(ctx context.Context, tx *sql.Tx, nws []NewWorkflow, at time.Time, onRow func(NewWorkflow) bool) (map[int64]bool, error) {
	rows := make([][]any, len(nws))
	keyed := false
	for i, nw := range nws {
		var bizKey, steps any
		if nw.BizKey != nil {
			bizKey, keyed = []byte(*nw.BizKey), true
		}
		open := len(nw.Steps)
		if onRow(nw) {
			text, err := encodeSteps(nw)
			if err != nil {
				return nil, err
			}
			steps = text
			if countsLeavesOnly(nw) {
				open -= len(parentsInWorkflow(nw))
			}
		}
		rows[i] = []any{nw.ID, nw.Name, bizKey, string(contracts.WorkflowRunning), open, workflowTaskCount(nw) - len(nw.Steps), steps, at, at}
	}
	err := insertRows(ctx, tx, `INSERT INTO workflows (id, name, biz_key, status, open_steps, compensations, steps, created_at, updated_at) VALUES `,
		` ON DUPLICATE KEY UPDATE id = IF(id = VALUES(id), NULL, id)`, rows)
	if isNullID(err) {
		return nil, fmt.Errorf("insert workflows: %w", ErrIDTaken)
	}
	if err != nil {
		return nil, fmt.Errorf("insert workflows: %w", err)
	}
	ids := make([]int64, len(nws))
	for i, nw := range nws {
		ids[i] = nw.ID
	}
	if !keyed {
		// Without a biz_key only the primary key can refuse a row, and a
		// collision there failed the insert.
		found := make(map[int64]bool, len(ids))
		for _, id := range ids {
			found[id] = true
		}
		return found, nil
	}
	found := make(map[int64]bool, len(ids))
	for chunk := range slices.Chunk(ids, batchChunkRows) {
		rows, err := tx.QueryContext(ctx, `SELECT id FROM workflows WHERE id IN (`+marks(len(chunk))+`)`, int64Args(chunk)...)
		if err != nil {
			return nil, fmt.Errorf("find inserted workflows: %w", err)
		}
		got, err := scanIDs(rows)
		if err != nil {
			return nil, fmt.Errorf("find inserted workflows: %w", err)
		}
		for _, id := range got {
			found[id] = true
		}
	}
	return found, nil
}

// insertWorkflowSteps links the created workflows to their tasks, whose
// results (out, in workflowTasks order) must all be new: a step or a
// compensation deduplicated against an existing task fails the call.
func insertWorkflowSteps(ctx context.Context, tx *sql.Tx, nws []NewWorkflow, created map[int64]bool, out []BatchResult,
	onRow func(NewWorkflow) bool) error {
	var rows [][]any
	k := 0
	for _, nw := range nws {
		if !created[nw.ID] {
			continue
		}
		listed := onRow(nw)
		for i, st := range nw.Steps {
			if out[k+i].Deduplicated {
				return &StepTakenError{Key: st.Key, TaskID: out[k+i].Task.ID}
			}
			if listed {
				continue
			}
			var comp any
			if st.Compensation != nil {
				comp = st.Compensation.ID
			}
			rows = append(rows, []any{nw.ID, st.Key, i, st.Task.ID, comp})
		}
		n := workflowTaskCount(nw)
		for _, r := range out[k+len(nw.Steps) : k+n] {
			if r.Deduplicated {
				return &StepTakenError{Key: "compensation", TaskID: r.Task.ID}
			}
		}
		k += n
	}
	if len(rows) == 0 {
		return nil
	}
	return insertRows(ctx, tx, `INSERT INTO workflow_steps (workflow_id, step_key, position, task_id, compensation_task_id) VALUES `, "", rows)
}

// createdWorkflow is what GetWorkflow would answer for the workflow just
// created, built from what was written (nothing settles a new workflow's
// steps at once: their parents are new too), without reading it back.
func createdWorkflow(nw NewWorkflow, out []BatchResult, at time.Time) *Workflow {
	w := &Workflow{ID: nw.ID, Name: nw.Name, BizKey: nw.BizKey, Status: contracts.WorkflowRunning,
		CreatedAt: at, UpdatedAt: at, Steps: make([]WorkflowStep, len(nw.Steps))}
	for i, st := range nw.Steps {
		parents := slices.Clone(st.Task.Parents)
		slices.SortFunc(parents, func(a, b Dependency) int { return cmp.Compare(a.ParentID, b.ParentID) })
		w.Steps[i] = WorkflowStep{Key: st.Key, TaskID: st.Task.ID, Type: st.Task.Type, Status: out[i].Task.Status,
			Parents: parents}
		if st.Compensation != nil {
			w.Steps[i].CompensationTaskID, w.Steps[i].CompensationStatus = st.Compensation.ID, contracts.StatusSuspend
		}
	}
	return w
}

func (s *Store) workflowByBizKey(ctx context.Context, name, bizKey string) (*Workflow, error) {
	var id int64
	err := s.db.QueryRowContext(ctx, `SELECT id FROM workflows WHERE name = ? AND biz_key = ?`, name, []byte(bizKey)).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		// The insert was refused by the primary key, not the name and key.
		return nil, fmt.Errorf("workflow %q: %w", name, ErrIDTaken)
	}
	if err != nil {
		return nil, fmt.Errorf("load workflow %q by biz_key: %w", name, err)
	}
	return s.GetWorkflow(ctx, id)
}

// GetWorkflow loads a workflow with its steps and their tasks' states.
func (s *Store) GetWorkflow(ctx context.Context, id int64) (*Workflow, error) {
	var w Workflow
	var bizKey []byte
	var status string
	var listed sql.NullString
	err := s.db.QueryRowContext(ctx, `SELECT id, name, biz_key, status, reason, created_at, updated_at, steps FROM workflows WHERE id = ?`, id).
		Scan(&w.ID, &w.Name, &bizKey, &status, &w.Reason, &w.CreatedAt, &w.UpdatedAt, &listed)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("workflow %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get workflow %d: %w", id, err)
	}
	w.Status = contracts.WorkflowStatus(status)
	if bizKey != nil {
		k := string(bizKey)
		w.BizKey = &k
	}
	if listed.Valid {
		refs, err := decodeSteps(id, listed.String)
		if err != nil {
			return nil, err
		}
		if w.Steps, err = s.stepStates(ctx, refs); err != nil {
			return nil, err
		}
		if err := s.fillStepParents(ctx, &w, true); err != nil {
			return nil, err
		}
		return &w, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT ws.step_key, ws.task_id, t.task_type, t.status,
			COALESCE(ws.compensation_task_id, 0), COALESCE(c.status, '')
		FROM workflow_steps ws JOIN tasks t ON t.id = ws.task_id LEFT JOIN tasks c ON c.id = ws.compensation_task_id
		WHERE ws.workflow_id = ? ORDER BY ws.position`, id)
	if err != nil {
		return nil, fmt.Errorf("steps of workflow %d: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var st WorkflowStep
		var ts, cs string
		if err := rows.Scan(&st.Key, &st.TaskID, &st.Type, &ts, &st.CompensationTaskID, &cs); err != nil {
			return nil, fmt.Errorf("steps of workflow %d: %w", id, err)
		}
		st.Status, st.CompensationStatus = contracts.Status(ts), contracts.Status(cs)
		w.Steps = append(w.Steps, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("steps of workflow %d: %w", id, err)
	}
	if err := s.fillStepParents(ctx, &w, false); err != nil {
		return nil, err
	}
	return &w, nil
}

// stepEdgesSQL reads a workflow's edges from its steps, whatever the
// table sizes: sorted by the edges' columns, MariaDB would rather walk
// every edge of every workflow (70 ms a call among 70,000 of them).
const stepEdgesSQL = `SELECT d.child_id, d.parent_id, d.cond FROM workflow_steps ws FORCE INDEX (PRIMARY)
	STRAIGHT_JOIN task_dependencies d FORCE INDEX (idx_task_dependencies_child) ON d.child_id = ws.task_id
	WHERE ws.workflow_id = ? ORDER BY d.child_id, d.parent_id`

// stepEdgesByChildSQL reads the edges into n steps listed on their
// workflow's row, by their task IDs.
func stepEdgesByChildSQL(n int) string {
	return `SELECT child_id, parent_id, cond FROM task_dependencies FORCE INDEX (idx_task_dependencies_child)
		WHERE child_id IN (` + marks(n) + `) ORDER BY child_id, parent_id`
}

// fillStepParents reads the parents of w's steps: by the workflow's key in
// workflow_steps, or, for steps listed on its row, by their task IDs.
func (s *Store) fillStepParents(ctx context.Context, w *Workflow, listed bool) error {
	idx := make(map[int64]int, len(w.Steps))
	ids := make([]int64, len(w.Steps))
	for i, st := range w.Steps {
		idx[st.TaskID] = i
		ids[i] = st.TaskID
	}
	read := func(q string, args ...any) error {
		rows, err := s.db.QueryContext(ctx, q, args...)
		if err != nil {
			return fmt.Errorf("dependencies of workflow %d: %w", w.ID, err)
		}
		defer rows.Close()
		for rows.Next() {
			var child int64
			var d Dependency
			var c string
			if err := rows.Scan(&child, &d.ParentID, &c); err != nil {
				return fmt.Errorf("dependencies of workflow %d: %w", w.ID, err)
			}
			d.When = contracts.Condition(c)
			if i, ok := idx[child]; ok {
				w.Steps[i].Parents = append(w.Steps[i].Parents, d)
			}
		}
		return rows.Err()
	}
	if !listed {
		return read(stepEdgesSQL, w.ID)
	}
	for chunk := range slices.Chunk(ids, batchChunkRows) {
		if err := read(stepEdgesByChildSQL(len(chunk)), int64Args(chunk)...); err != nil {
			return err
		}
	}
	return nil
}

// WorkflowOf returns the ID of the workflow task id is a step or a
// compensation of, or 0: from its row, which names it (migration 0019),
// or else from workflow_steps.
func (s *Store) WorkflowOf(ctx context.Context, id int64) (int64, error) {
	var onRow sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT workflow_id FROM tasks WHERE id = ?`, id).Scan(&onRow)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("workflow of task %d: %w", id, err)
	}
	if onRow.Valid {
		return onRow.Int64, nil
	}
	var wf int64
	err = s.db.QueryRowContext(ctx, `SELECT workflow_id FROM workflow_steps WHERE task_id = ?
		UNION ALL SELECT workflow_id FROM workflow_steps WHERE compensation_task_id = ? LIMIT 1`, id, id).Scan(&wf)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("workflow of task %d: %w", id, err)
	}
	return wf, nil
}

// CancelWorkflow cancels a running or compensating workflow and, in the
// same transaction, every step and compensation that has not ended.
func (s *Store) CancelWorkflow(ctx context.Context, id int64, actor string) (*Workflow, error) {
	var err error
	for try := 0; try < 3; try++ {
		err = s.inTx(ctx, func(tx *sql.Tx) error { return s.cancelWorkflowTx(ctx, tx, id, actor) })
		if err == nil || !IsDeadlock(err) {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	s.notify()
	return s.GetWorkflow(ctx, id)
}

func (s *Store) cancelWorkflowTx(ctx context.Context, tx *sql.Tx, id int64, actor string) error {
	steps, _, err := stepsOf(ctx, tx, id)
	if err != nil {
		return err
	}
	tasks := stepTaskIDs(steps)
	// Tasks first, then the workflow: the order every final transfer
	// takes.
	status, err := lockStatuses(ctx, tx, tasks)
	if err != nil {
		return err
	}
	locked, err := lockWorkflows(ctx, tx, []int64{id})
	if err != nil {
		return err
	}
	wf := locked[id]
	if wf.status.Final() {
		return fmt.Errorf("workflow %d is %s: %w", id, wf.status, ErrWorkflowFinal)
	}
	wf.status, wf.reason = contracts.WorkflowCancelled, "cancelled by "+actor
	if err := wf.save(ctx, tx); err != nil {
		return err
	}
	slices.Sort(tasks)
	var chains [][]TransferParams
	var tids []int64
	for _, t := range tasks {
		if contracts.CanTransition(status[t], contracts.StatusCancelled) {
			chains = append(chains, []TransferParams{{TaskID: t, From: status[t], To: contracts.StatusCancelled,
				Reason: fmt.Sprintf("workflow %d cancelled", id), Actor: actor}})
			tids = append(tids, t)
		}
	}
	return s.mustTransfer(ctx, tx, chains, tids)
}

// mustTransfer runs chains in tx; a chain that loses is an error, since
// the caller holds the rows' locks and checked their states.
func (s *Store) mustTransfer(ctx context.Context, tx *sql.Tx, chains [][]TransferParams, ids []int64) error {
	if len(chains) == 0 {
		return nil
	}
	rows, err := lockRows(ctx, tx, ids, false)
	if err != nil {
		return err
	}
	return s.mustTransferLocked(ctx, tx, chains, rows)
}

// mustTransferLocked is mustTransfer on rows the caller locked (lockRows).
func (s *Store) mustTransferLocked(ctx context.Context, tx *sql.Tx, chains [][]TransferParams, rows map[int64]rowState) error {
	out := make([]ChainResult, len(chains))
	if err := s.transferLockedTx(ctx, tx, chains, rows, out); err != nil {
		return err
	}
	for _, r := range out {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// workflowRow is a locked workflow row.
type workflowRow struct {
	id         int64
	status     contracts.WorkflowStatus
	reason     string
	openSteps  int
	openComps  int
	compFailed bool
	// comps is how many compensation tasks the workflow has; not Valid
	// for a workflow created before that was recorded.
	comps sql.NullInt32
}

// lockWorkflows locks the rows of ids, in ascending order, in one query.
// FORCE INDEX, as in lockRows: on a small table the optimiser would rather
// scan it, which under FOR UPDATE locks every row and gap, and workflows
// being created then deadlock with the outcomes that lock them.
func lockWorkflows(ctx context.Context, tx *sql.Tx, ids []int64) (map[int64]*workflowRow, error) {
	out := make(map[int64]*workflowRow, len(ids))
	for chunk := range slices.Chunk(ids, batchChunkRows) {
		in, args := inIDs(chunk)
		rows, err := tx.QueryContext(ctx, `SELECT id, status, reason, open_steps, open_compensations, compensation_failed, compensations
			FROM workflows FORCE INDEX (PRIMARY) WHERE id IN (`+in+`) ORDER BY id FOR UPDATE`, args...)
		if err != nil {
			return nil, fmt.Errorf("lock workflows: %w", err)
		}
		for rows.Next() {
			w := &workflowRow{}
			var st string
			if err := rows.Scan(&w.id, &st, &w.reason, &w.openSteps, &w.openComps, &w.compFailed, &w.comps); err != nil {
				rows.Close()
				return nil, fmt.Errorf("lock workflows: %w", err)
			}
			w.status = contracts.WorkflowStatus(st)
			out[w.id] = w
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("lock workflows: %w", err)
		}
	}
	for _, id := range ids {
		if out[id] == nil {
			return nil, fmt.Errorf("workflow %d: %w", id, ErrNotFound)
		}
	}
	return out, nil
}

// saveWorkflows writes the rows ws, one UPDATE ... WHERE id IN per set of
// rows that end up alike: a batch of outcomes moves most of its workflows
// the same way (one step fewer open, or ended with every step), so it
// costs a statement or two. (A CASE per column keyed by id made MariaDB
// walk the whole list for every row: quadratic in the batch.) The rows
// are locked (lockWorkflows), so the order of the statements is free.
func saveWorkflows(ctx context.Context, tx *sql.Tx, ws []*workflowRow) error {
	type values struct {
		status     contracts.WorkflowStatus
		reason     string
		openSteps  int
		openComps  int
		compFailed bool
	}
	var order []values
	groups := map[values][]int64{}
	for _, w := range ws {
		v := values{w.status, Truncate(w.reason, 2048), w.openSteps, w.openComps, w.compFailed}
		if _, ok := groups[v]; !ok {
			order = append(order, v)
		}
		groups[v] = append(groups[v], w.id)
	}
	for _, v := range order {
		err := execIn(ctx, tx, `UPDATE workflows FORCE INDEX (PRIMARY) SET status = ?, reason = ?, open_steps = ?,
			open_compensations = ?, compensation_failed = ? WHERE id IN `, groups[v],
			string(v.status), v.reason, v.openSteps, v.openComps, v.compFailed)
		if err != nil {
			return fmt.Errorf("update %d workflow(s): %w", len(groups[v]), err)
		}
	}
	return nil
}

func (w *workflowRow) save(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `UPDATE workflows SET status = ?, reason = ?, open_steps = ?, open_compensations = ?,
		compensation_failed = ? WHERE id = ?`, string(w.status), Truncate(w.reason, 2048), w.openSteps, w.openComps, w.compFailed, w.id)
	if err != nil {
		return fmt.Errorf("update workflow %d: %w", w.id, err)
	}
	return nil
}
