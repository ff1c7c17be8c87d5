package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"

	"github.com/axsched/ax/contracts"
)

// The workflow state machine, driven by the final transfers of its tasks
// (see docs/workflows.md for the diagram):
//
//	RUNNING -> SUCCEEDED            every step ended, none failed unhandled
//	RUNNING -> FAILED               a step failed for good, unhandled, and
//	                                no succeeded step has a compensation
//	RUNNING -> COMPENSATING         ... and some have: they run, last first
//	COMPENSATING -> COMPENSATED     every compensation succeeded
//	COMPENSATING -> COMPENSATION_FAILED  one did not
//	RUNNING, COMPENSATING -> CANCELLED   through the API
//
// A failure is handled when the failed step has a child that waits for
// its failure (when: failure or always): the workflow then goes on.

// everyStepEnded is the reason of a workflow that SUCCEEDED.
const everyStepEnded = "every step ended"

// stepEvent is a workflow task that ended in this transaction.
type stepEvent struct {
	taskID  int64
	key     string // "" until read, for a step known from its row
	status  contracts.Status
	compFor bool // a compensation, not a step
	// open: the step had not ended before. A step ends once; a re-run
	// from a dead letter ending again changes nothing. A step its row
	// places (migration 0019) is assumed open, and recordStepEnds checks.
	open bool
	// uncompensated: its row says its workflow has no compensations
	// (roleUncompensated).
	uncompensated bool
	// firstEnd: its row vouches that the task never ended before (its
	// role, and a claim for every try: see firstEnd).
	firstEnd bool
	// listed: a step listed on its workflow's row (roleListed), whose
	// end is recorded nowhere but on its task.
	listed bool
	// uncounted: a step whose end leaves its workflow's count of open
	// steps alone (roleUncounted).
	uncounted bool
}

// firstEnd reports whether a step's locked row vouches that this end is
// its first: the row places it (migration 0019), no re-run from a dead
// letter marked it, and it was claimed once plus once per retry. A re-run
// from a dead letter resets retry_count and claims again, so whichever
// release made it, attempt then exceeds retry_count + 1 for good (as does
// a run the reaper handed back).
func firstEnd(st rowState) bool {
	return st.roleKnown && st.role&roleStep != 0 && st.role&roleEndedBefore == 0 && st.attempt == st.retries+1
}

// workflowsAfterFinal tells the workflows of the tasks in ids (those that
// are steps or compensations) that they ended with finals. rows, the
// tasks as locked, name the workflow of the tasks created since migration
// 0019; the others are looked up in workflow_steps.
func (s *Store) workflowsAfterFinal(ctx context.Context, tx *sql.Tx, ids []int64, finals map[int64]contracts.Status, rows map[int64]rowState) error {
	byWF := map[int64][]stepEvent{}
	var look []int64
	for _, id := range ids {
		st := rows[id]
		switch {
		case !st.roleKnown || st.role&roleEndedBefore != 0:
			look = append(look, id)
		case st.role&roleStep != 0:
			e := stepEvent{taskID: id, status: finals[id], open: true, uncompensated: st.role&roleUncompensated != 0,
				firstEnd: firstEnd(st), listed: st.role&roleListed != 0, uncounted: st.role&roleUncounted != 0}
			if e.uncounted && e.uncompensated && e.status == contracts.StatusSuccess {
				// Changes nothing: neither the count nor the state (its
				// workflow ends with its leaves, and never compensates).
				continue
			}
			byWF[st.workflow] = append(byWF[st.workflow], e)
		case st.role&roleCompensation != 0:
			byWF[st.workflow] = append(byWF[st.workflow], stepEvent{taskID: id, status: finals[id], compFor: true})
		}
		// Role 0: a DAG task in no workflow.
	}
	if err := lookUpSteps(ctx, tx, look, finals, byWF); err != nil {
		return err
	}
	if len(byWF) == 0 {
		return nil
	}
	recount, err := recordStepEnds(ctx, tx, byWF)
	if err != nil {
		return err
	}
	if fast, n, ok := onlySuccesses(byWF, recount); ok {
		return countDownSteps(ctx, tx, fast, n)
	}
	wfs := make([]int64, 0, len(byWF))
	for wf := range byWF {
		wfs = append(wfs, wf)
	}
	slices.Sort(wfs)
	// Tasks first, then the workflows.
	counted, err := countAheadOfCancelled(ctx, tx, wfs, byWF)
	if err != nil {
		return err
	}
	locked, err := lockWorkflows(ctx, tx, wfs)
	if err != nil {
		return err
	}
	if err := recountOpenSteps(ctx, tx, locked, recount, byWF); err != nil {
		return err
	}
	for wf, n := range counted {
		locked[wf].openSteps += n
	}
	// The common case (a step ended, maybe the workflow with it) is
	// decided in memory and written for every workflow at once; starting
	// a compensation writes its own.
	var save []*workflowRow
	var ended []int64
	for _, id := range wfs {
		w := locked[id]
		wasFinal := w.status.Final()
		saved, err := s.workflowEvents(ctx, tx, w, byWF[id])
		if err != nil {
			return err
		}
		if saved {
			continue
		}
		save = append(save, w)
		// Without compensations there is nothing to cancel: the search
		// for them is spared (a known count only, see migration 0018).
		if w.status.Final() && !wasFinal && (!w.comps.Valid || w.comps.Int32 > 0) {
			ended = append(ended, id)
		}
	}
	if err := saveWorkflows(ctx, tx, save); err != nil {
		return err
	}
	// Saved first, so that these cancellations' own final transfers find
	// their workflows ended and are not counted.
	return s.cancelUnneeded(ctx, tx, ended, nil, func(wf int64) string {
		return fmt.Sprintf("not needed: workflow %s", locked[wf].status)
	})
}

// countAheadOfCancelled keeps the count of a workflow that counts only
// its leaves true when a step is cancelled by hand (or with a filter)
// before its ancestors ended, which ends a leaf out of turn: the steps of
// such a workflow that have not ended and were not counted (roleUncounted)
// are counted from now on, and the returned number, by workflow, is added
// to its open steps. That is more than the cancelled step's ancestors, and
// safe: a step counted ends anyway before the workflow would. A step
// cancelled by its parent's settlement has no ancestor left open, so this
// finds none. Only cancellations of steps listed on their rows look.
func countAheadOfCancelled(ctx context.Context, tx *sql.Tx, wfs []int64, byWF map[int64][]stepEvent) (map[int64]int, error) {
	var out map[int64]int
	for _, wf := range wfs {
		if !slices.ContainsFunc(byWF[wf], func(e stepEvent) bool {
			return e.listed && e.open && e.status == contracts.StatusCancelled
		}) {
			continue
		}
		steps, _, err := stepsOf(ctx, tx, wf)
		if err != nil {
			return nil, err
		}
		ids := stepTaskIDs(steps)
		if len(ids) == 0 {
			continue
		}
		slices.Sort(ids)
		n, err := execInCount(ctx, tx, `UPDATE tasks FORCE INDEX (PRIMARY) SET workflow_role = workflow_role & ~`+fmt.Sprint(roleUncounted)+`
			WHERE workflow_role & `+fmt.Sprint(roleUncounted)+` <> 0 AND status NOT IN (`+marks(len(finalStateArgs))+`) AND id IN `, ids, finalStateArgs...)
		if err != nil {
			return nil, fmt.Errorf("count the open steps of workflow %d: %w", wf, err)
		}
		if n > 0 {
			if out == nil {
				out = map[int64]int{}
			}
			out[wf] = int(n)
		}
	}
	return out, nil
}

// onlySuccesses reports whether every workflow of byWF only counts down
// its open steps, each by the same number n: each of its ended tasks is a
// step, open, that succeeded, of a workflow without compensations, and
// its open steps need no recount. Such an end cannot fail, compensate or
// cancel anything: the workflow loses n open steps, and the last of them
// makes a RUNNING workflow SUCCEEDED. A batch with a workflow that needs
// more (or that counts down two workflows by different numbers, which
// would take two statements) goes the long way, so that one statement
// locks its workflows in ascending order, as every transaction does.
func onlySuccesses(byWF map[int64][]stepEvent, recount map[int64]bool) (wfs []int64, n int, ok bool) {
	for wf, evs := range byWF {
		if recount[wf] || (n != 0 && len(evs) != n) {
			return nil, 0, false
		}
		for _, e := range evs {
			if e.compFor || !e.open || !e.uncompensated || e.status != contracts.StatusSuccess {
				return nil, 0, false
			}
		}
		n = len(evs)
		wfs = append(wfs, wf)
	}
	slices.Sort(wfs)
	return wfs, n, true
}

// countDownSteps takes n open steps from each workflow of wfs with one
// UPDATE, without reading them first: what workflowEvents and
// saveWorkflows do for the successes onlySuccesses admits, the lock
// included. Each assignment reads only values from before the statement,
// so the result is the same whether MariaDB assigns left to right or all
// at once (SIMULTANEOUS_ASSIGNMENT).
func countDownSteps(ctx context.Context, tx *sql.Tx, wfs []int64, n int) error {
	changed, err := execInCount(ctx, tx, `UPDATE workflows FORCE INDEX (PRIMARY)
		SET reason = IF(status = ? AND open_steps <= ?, ?, reason),
			status = IF(status = ? AND open_steps <= ?, ?, status),
			open_steps = open_steps - ?
		WHERE id IN `, wfs,
		string(contracts.WorkflowRunning), n, everyStepEnded,
		string(contracts.WorkflowRunning), n, string(contracts.WorkflowSucceeded), n)
	if err != nil {
		return fmt.Errorf("count down the open steps of %d workflow(s): %w", len(wfs), err)
	}
	if changed != int64(len(wfs)) {
		return fmt.Errorf("count down the open steps of %d workflow(s), %d found: %w", len(wfs), changed, ErrNotFound)
	}
	return nil
}

// lookUpSteps finds in workflow_steps the workflows of the tasks in ids
// that are steps or compensations, steps and compensations in one round
// trip: the outcome transaction this runs in holds every outcome behind
// it in its writer.
func lookUpSteps(ctx context.Context, tx *sql.Tx, ids []int64, finals map[int64]contracts.Status, byWF map[int64][]stepEvent) error {
	for chunk := range slices.Chunk(ids, batchChunkRows) {
		list, ids := inIDs(chunk)
		in := `(` + list + `)`
		args := append(ids, ids...)
		rows, err := tx.QueryContext(ctx, `SELECT workflow_id, task_id, step_key, final_status IS NULL, 0 FROM workflow_steps WHERE task_id IN `+in+`
			UNION ALL SELECT workflow_id, compensation_task_id, step_key, final_status IS NULL, 1 FROM workflow_steps WHERE compensation_task_id IN `+in, args...)
		if err != nil {
			return fmt.Errorf("find workflows: %w", err)
		}
		for rows.Next() {
			var wf int64
			var e stepEvent
			if err := rows.Scan(&wf, &e.taskID, &e.key, &e.open, &e.compFor); err != nil {
				rows.Close()
				return fmt.Errorf("find workflows: %w", err)
			}
			e.status = finals[e.taskID]
			byWF[wf] = append(byWF[wf], e)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("find workflows: %w", err)
		}
	}
	return nil
}

// recordStepEnds writes the final state of the steps that ended, one
// statement per state. The steps' task rows are locked by the transfer,
// so nobody else ends them meanwhile. A step its row placed is assumed
// not to have ended before; when fewer rows change than were assumed open
// (a step re-run from a dead letter by a release before migration 0019,
// which did not mark it), the workflows of that state are returned, for
// their open steps to be counted afresh.
//
// A success is not written where nothing would read it (unrecorded): the
// first end of a step of a workflow without compensations. SUCCESS is
// final for good, so no later end asks whether it ended before, and only
// compensations are chosen by final_status; the open steps' recount
// reads the tasks' own state for it.
func recordStepEnds(ctx context.Context, tx *sql.Tx, byWF map[int64][]stepEvent) (map[int64]bool, error) {
	byStatus := map[contracts.Status][]int64{}
	wfsOf := map[contracts.Status][]int64{}
	for wf, evs := range byWF {
		for _, e := range evs {
			if !e.compFor && e.open && !e.listed && !unrecorded(e) {
				byStatus[e.status] = append(byStatus[e.status], e.taskID)
				wfsOf[e.status] = append(wfsOf[e.status], wf)
			}
		}
	}
	var recount map[int64]bool
	for st, ids := range byStatus {
		n, err := execInCount(ctx, tx, `UPDATE workflow_steps FORCE INDEX (uk_workflow_steps_task) SET final_status = ? WHERE final_status IS NULL AND task_id IN `, ids, string(st))
		if err != nil {
			return nil, fmt.Errorf("record the end of %d step(s): %w", len(ids), err)
		}
		if n < int64(len(ids)) {
			if recount == nil {
				recount = map[int64]bool{}
			}
			for _, wf := range wfsOf[st] {
				recount[wf] = true
			}
		}
	}
	return recount, nil
}

// unrecorded reports whether recordStepEnds leaves e's end unwritten.
func unrecorded(e stepEvent) bool {
	return e.firstEnd && e.uncompensated && e.status == contracts.StatusSuccess
}

// recountOpenSteps sets the open steps of the locked workflows in recount
// to what workflow_steps says (a step that succeeded may have no
// final_status: unrecorded), plus the ends workflowEvents is about to
// count; this transaction's own ends have their final state on their task
// rows already.
func recountOpenSteps(ctx context.Context, tx *sql.Tx, locked map[int64]*workflowRow, recount map[int64]bool, byWF map[int64][]stepEvent) error {
	for wf := range recount {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM workflow_steps ws JOIN tasks t ON t.id = ws.task_id
			WHERE ws.workflow_id = ? AND ws.final_status IS NULL AND t.status <> ?`, wf, string(contracts.StatusSuccess)).Scan(&n); err != nil {
			return fmt.Errorf("count the open steps of workflow %d: %w", wf, err)
		}
		for _, e := range byWF[wf] {
			if !e.compFor && e.open {
				n++
			}
		}
		locked[wf].openSteps = n
	}
	return nil
}

// workflowEvents applies the ended tasks of one locked workflow to w. It
// returns saved when it wrote the row itself (a compensation started);
// otherwise the caller saves w.
func (s *Store) workflowEvents(ctx context.Context, tx *sql.Tx, w *workflowRow, evs []stepEvent) (saved bool, _ error) {
	var failed *stepEvent
	var succeeded []int64
	for i, e := range evs {
		if e.compFor {
			if w.status == contracts.WorkflowCompensating {
				w.openComps--
				w.compFailed = w.compFailed || e.status != contracts.StatusSuccess
			}
			continue
		}
		if !e.open {
			continue
		}
		if !e.uncounted {
			w.openSteps--
		}
		switch e.status {
		case contracts.StatusFailed, contracts.StatusTimeout:
			handled, err := failureHandled(ctx, tx, e.taskID)
			if err != nil {
				return false, err
			}
			if !handled && failed == nil {
				failed = &evs[i]
			}
		case contracts.StatusSuccess:
			succeeded = append(succeeded, e.taskID)
		}
	}
	switch {
	case failed != nil && w.status == contracts.WorkflowRunning:
		return true, s.startCompensation(ctx, tx, w, *failed)
	case w.status == contracts.WorkflowCompensating && len(succeeded) > 0:
		// A step that was running when another failed and succeeded
		// since is undone too, at once.
		n, err := s.releaseCompensations(ctx, tx, w.id, succeeded)
		if err != nil {
			return false, err
		}
		w.openComps += n
	case w.status == contracts.WorkflowRunning && w.openSteps <= 0:
		w.status, w.reason = contracts.WorkflowSucceeded, everyStepEnded
	}
	if w.status == contracts.WorkflowCompensating && w.openComps <= 0 {
		w.status = contracts.WorkflowCompensated
		if w.compFailed {
			w.status = contracts.WorkflowCompensationFailed
		}
	}
	return false, nil
}

// failureHandled reports whether a failed step has a child that waits for
// its failure.
func failureHandled(ctx context.Context, tx *sql.Tx, taskID int64) (bool, error) {
	var n int
	err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM task_dependencies WHERE parent_id = ? AND cond <> 'success'`, taskID).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("failure branches of task %d: %w", taskID, err)
	}
	return n > 0, nil
}

// startCompensation answers a step that failed for good: the compensations
// of the steps that succeeded run one after the other, the last step's
// first, each waiting for the one before to end (when: always); the other
// compensations are cancelled. With nothing to compensate the workflow
// fails.
func (s *Store) startCompensation(ctx context.Context, tx *sql.Tx, w *workflowRow, failed stepEvent) error {
	comps, err := queryPairs(ctx, tx, `SELECT compensation_task_id, position FROM workflow_steps
		WHERE final_status = 'SUCCESS' AND compensation_task_id IS NOT NULL AND workflow_id IN `, []int64{w.id}, ` ORDER BY position DESC`)
	if err != nil {
		return fmt.Errorf("compensations of workflow %d: %w", w.id, err)
	}
	chain := make([]int64, len(comps))
	for i, c := range comps {
		chain[i] = c[0]
	}
	if failed.key == "" && failed.listed {
		keys, err := listedStepKeys(ctx, tx, []int64{failed.taskID})
		if err != nil {
			return err
		}
		failed.key = keys[failed.taskID]
	}
	if failed.key == "" {
		if err := tx.QueryRowContext(ctx, `SELECT step_key FROM workflow_steps WHERE task_id = ?`, failed.taskID).Scan(&failed.key); err != nil {
			return fmt.Errorf("step of task %d: %w", failed.taskID, err)
		}
	}
	why := fmt.Sprintf("step %q (task %d) ended %s", failed.key, failed.taskID, failed.status)
	if len(chain) == 0 {
		w.status, w.reason = contracts.WorkflowFailed, why
		if err := w.save(ctx, tx); err != nil {
			return err
		}
		return s.cancelUnneeded(ctx, tx, []int64{w.id}, nil, func(int64) string { return "not needed: " + why })
	}
	// The compensations of steps that have not ended stay, in case they
	// succeed while the others run (releaseCompensations). The rest are
	// cancelled while the workflow is still RUNNING, so that their own
	// final transfers are not counted as compensations.
	open, err := queryPairs(ctx, tx, `SELECT compensation_task_id, position FROM workflow_steps
		WHERE final_status IS NULL AND compensation_task_id IS NOT NULL AND workflow_id IN `, []int64{w.id}, ``)
	if err != nil {
		return fmt.Errorf("compensations of workflow %d: %w", w.id, err)
	}
	keep := slices.Clone(chain)
	for _, o := range open {
		keep = append(keep, o[0])
	}
	if err := s.cancelUnneeded(ctx, tx, []int64{w.id}, keep, func(int64) string { return "not needed: " + why }); err != nil {
		return err
	}
	edges := make([][]any, 0, len(chain)-1)
	for i := 1; i < len(chain); i++ {
		edges = append(edges, []any{chain[i-1], chain[i], string(contracts.WhenAlways)})
	}
	if len(edges) > 0 {
		if err := insertRows(ctx, tx, `INSERT INTO task_dependencies (parent_id, child_id, cond) VALUES `, "", edges); err != nil {
			return fmt.Errorf("chain compensations of workflow %d: %w", w.id, err)
		}
	}
	w.status, w.reason = contracts.WorkflowCompensating, fmt.Sprintf("%s: compensating %d step(s)", why, len(chain))
	w.openComps = len(chain)
	if err := w.save(ctx, tx); err != nil {
		return err
	}
	return s.releaseNow(ctx, tx, chain[:1], "compensation started: "+why)
}

// releaseCompensations starts at once the compensations of the steps in
// taskIDs, returning how many it started.
func (s *Store) releaseCompensations(ctx context.Context, tx *sql.Tx, wf int64, taskIDs []int64) (int, error) {
	pairs, err := queryPairs(ctx, tx, `SELECT compensation_task_id, task_id FROM workflow_steps WHERE compensation_task_id IS NOT NULL AND task_id IN `, taskIDs, ``)
	if err != nil {
		return 0, fmt.Errorf("compensations of workflow %d: %w", wf, err)
	}
	var ids []int64
	for _, p := range pairs {
		ids = append(ids, p[0])
	}
	if len(ids) == 0 {
		return 0, nil
	}
	status, err := lockStatuses(ctx, tx, ids)
	if err != nil {
		return 0, err
	}
	ids = slices.DeleteFunc(ids, func(id int64) bool { return status[id] != contracts.StatusSuspend })
	slices.Sort(ids)
	return len(ids), s.releaseNow(ctx, tx, ids, "compensation started: the step succeeded after the workflow began compensating")
}

// releaseNow moves SUSPEND tasks to READY, due at once.
func (s *Store) releaseNow(ctx context.Context, tx *sql.Tx, ids []int64, reason string) error {
	if len(ids) == 0 {
		return nil
	}
	now := s.now().UnixMilli()
	chains := make([][]TransferParams, len(ids))
	for i, id := range ids {
		chains[i] = []TransferParams{{TaskID: id, From: contracts.StatusSuspend, To: contracts.StatusReady,
			Reason: reason, Actor: "workflow"}}
	}
	rows, err := lockRows(ctx, tx, ids, false)
	if err != nil {
		return err
	}
	return s.releaseLocked(ctx, tx, chains, rows, now)
}

// cancelUnneeded cancels the compensations of workflows wfs still
// waiting in SUSPEND, except those in keep, each with reason(its workflow).
func (s *Store) cancelUnneeded(ctx context.Context, tx *sql.Tx, wfs, keep []int64, reason func(wf int64) string) error {
	if len(wfs) == 0 {
		return nil
	}
	// By the workflows' key alone: a join on the tasks' state could be
	// driven from every SUSPEND task instead.
	pairs, err := queryPairs(ctx, tx, `SELECT compensation_task_id, workflow_id FROM workflow_steps
		WHERE compensation_task_id IS NOT NULL AND workflow_id IN `, wfs, ``)
	if err != nil {
		return fmt.Errorf("compensations of %d workflow(s): %w", len(wfs), err)
	}
	var ids []int64
	wfOf := map[int64]int64{}
	for _, p := range pairs {
		if !slices.Contains(keep, p[0]) {
			ids = append(ids, p[0])
			wfOf[p[0]] = p[1]
		}
	}
	if len(ids) == 0 {
		return nil
	}
	slices.Sort(ids)
	status, err := lockStatuses(ctx, tx, ids)
	if err != nil {
		return err
	}
	var chains [][]TransferParams
	var tids []int64
	for _, id := range ids {
		if status[id] == contracts.StatusSuspend {
			chains = append(chains, []TransferParams{{TaskID: id, From: contracts.StatusSuspend,
				To: contracts.StatusCancelled, Reason: reason(wfOf[id]), Actor: "workflow"}})
			tids = append(tids, id)
		}
	}
	return s.mustTransfer(ctx, tx, chains, tids)
}
