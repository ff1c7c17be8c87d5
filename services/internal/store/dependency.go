package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
)

// Dependencies between tasks (task_dependencies) and their release.
//
// A child waits in SUSPEND. The transfer that makes a parent final (SUCCESS,
// FAILED or TIMEOUT for good, CANCELLED) settles its children in the same
// transaction: it locks them, writes its final state onto its dependency
// rows, and moves every child whose parents have all ended to READY (every
// condition met) or CANCELLED (one can never be met), each through the
// ordinary transfer, with its history row and event. A cancelled child is
// final in turn and settles its own children.
//
// A parent's state goes onto its edges for its children's other parents:
// a parent whose children each have it as their only parent (dag_parents
// 1) settles them at once and leaves parent_status NULL, as nothing reads
// those edges again.
//
// Locks: a dependency row's parent_status is written only by a transaction
// that holds the child's row lock, an edge is inserted only by one that
// holds the parent's, and children are locked in ascending id order after
// their parents (a child's id is always above its parents'). So two
// parents ending at once are serialised on the child and the second sees
// the first's state; neither misses the other. A child's edges are read
// with a plain read, not a locking one: a locking read on the child index
// takes gap locks that made workflows created meanwhile wait for the
// outcome's commit. A plain read's snapshot is taken at the transaction's
// first plain read, which on the path of an ending task is this one, after
// the child's lock (everything before it locks), so it sees every commit
// that matters; a test ends eight parents of one child at once to hold
// this. Only a cascade (a
// cancelled child settling its own children later in the same
// transaction) can read an older snapshot and miss a grandchild's other
// parent ending meanwhile; that, and whatever else slips (a crash is not
// one: the release commits with the parent's outcome), is caught by the
// reaper's reconciler, which re-settles SUSPEND tasks whose parents have
// all ended (ReconcileSuspended): MySQL is the truth, a miss costs seconds.

// UnknownParentError names parents that do not exist.
type UnknownParentError struct{ IDs []int64 }

func (e *UnknownParentError) Error() string {
	ids := make([]string, len(e.IDs))
	for i, id := range e.IDs {
		ids[i] = strconv.FormatInt(id, 10)
	}
	return "no task with id " + strings.Join(ids, ", ") + " to depend on"
}

// Is makes errors.Is(err, ErrNotFound) true.
func (e *UnknownParentError) Is(target error) bool { return target == ErrNotFound }

// finalStates are the states after which a task's children are settled.
var finalStates = []contracts.Status{contracts.StatusSuccess, contracts.StatusFailed,
	contracts.StatusTimeout, contracts.StatusCancelled}

// isFinal reports whether s ends a task for its children: FAILED and TIMEOUT
// count once a transaction leaves them there, as a retry moves on to
// RETRYING in the transaction that records the failure.
func isFinal(s contracts.Status) bool { return slices.Contains(finalStates, s) }

// finalStateArgs are finalStates as query arguments.
var finalStateArgs = func() []any {
	out := make([]any, len(finalStates))
	for i, st := range finalStates {
		out[i] = string(st)
	}
	return out
}()

// linkParents writes the dependencies of the created tasks among nts that
// have parents: it locks the parents (so none ends unseen meanwhile), marks
// parents and children dag (a parent gets dag_children 1), inserts the edges with the state of parents
// that have ended already, and settles the children that can be settled
// at once.
func (s *Store) linkParents(ctx context.Context, tx *sql.Tx, nts []NewTask, created map[int64]bool) error {
	var edges [][]any
	parents := map[int64]bool{}
	for _, nt := range nts {
		if !created[nt.ID] {
			continue
		}
		for _, d := range nt.Parents {
			parents[d.ParentID] = true
			edges = append(edges, []any{d.ParentID, nt.ID, string(d.When)})
		}
	}
	if len(edges) == 0 {
		return nil
	}
	// A parent created by this call as a dag task (a workflow's step) is
	// new and uncommitted: nobody else can see it, let alone end it, and
	// it is marked already, so it needs neither lock nor mark.
	known := map[int64]contracts.Status{}
	for _, nt := range nts {
		if parents[nt.ID] && created[nt.ID] && nt.DAG {
			known[nt.ID] = nt.Status
		}
	}
	ids := make([]int64, 0, len(parents))
	for id := range parents {
		if _, ok := known[id]; !ok {
			ids = append(ids, id)
		}
	}
	status, err := lockStatuses(ctx, tx, ids)
	if err != nil {
		return err
	}
	maps.Copy(status, known)
	var missing []int64
	for _, id := range ids {
		if _, ok := status[id]; !ok {
			missing = append(missing, id)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		return &UnknownParentError{IDs: missing}
	}
	// dag_children first: MariaDB applies assignments left to right. A
	// parent whose shape is unknown (dag 1, dag_children NULL) stays so.
	if err := execIn(ctx, tx, `UPDATE tasks FORCE INDEX (PRIMARY) SET dag_children = 1, dag = 1 WHERE (dag = 0 OR dag_children = 0) AND id IN `, ids); err != nil {
		return fmt.Errorf("mark parents: %w", err)
	}
	var settle []int64
	for i := range edges {
		var ps any
		if st := status[edges[i][0].(int64)]; isFinal(st) {
			ps = string(st)
			settle = append(settle, edges[i][1].(int64))
		}
		edges[i] = append(edges[i], ps)
	}
	if err := insertRows(ctx, tx, `INSERT INTO task_dependencies (parent_id, child_id, cond, parent_status) VALUES `, "", edges); err != nil {
		return fmt.Errorf("insert dependencies: %w", err)
	}
	return s.settleChildren(ctx, tx, settle)
}

// lockStatuses locks the rows of ids in ascending order and returns their
// states; a missing id is absent from the map.
func lockStatuses(ctx context.Context, tx *sql.Tx, ids []int64) (map[int64]contracts.Status, error) {
	uniq := slices.Clone(ids)
	slices.Sort(uniq)
	uniq = slices.Compact(uniq)
	out := make(map[int64]contracts.Status, len(uniq))
	for chunk := range slices.Chunk(uniq, batchChunkRows) {
		in, args := inIDs(chunk)
		rows, err := tx.QueryContext(ctx, `SELECT id, status FROM tasks FORCE INDEX (PRIMARY) WHERE id IN (`+in+`) ORDER BY id FOR UPDATE`, args...)
		if err != nil {
			return nil, fmt.Errorf("lock tasks: %w", err)
		}
		for rows.Next() {
			var id int64
			var st string
			if err := rows.Scan(&id, &st); err != nil {
				rows.Close()
				return nil, fmt.Errorf("lock tasks: %w", err)
			}
			out[id] = contracts.Status(st)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("lock tasks: %w", err)
		}
	}
	return out, nil
}

// afterFinal runs, inside the transfer's transaction, for the dag tasks a
// transfer batch left in a final state: their children are settled, then
// their workflows told. Known leaves (dag_children 0, read under the row
// lock this transaction holds, which a child created meanwhile needs to
// set it) are not searched for children.
func (s *Store) afterFinal(ctx context.Context, tx *sql.Tx, finals map[int64]contracts.Status, leaves map[int64]bool, rows map[int64]rowState) error {
	ids := make([]int64, 0, len(finals))
	for id := range finals {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	look := make([]int64, 0, len(ids))
	for _, id := range ids {
		if !leaves[id] {
			look = append(look, id)
		}
	}
	if d, ok := ctx.Value(laterEndsKey{}).(*laterEnds); ok {
		// Ended by their parents' settlement: their workflows are told
		// with the parents' (below), so that a parent's failure is judged
		// with the cancellations it causes, and not after a cancelled
		// leaf has ended a workflow that counts only leaves
		// (workflowsteps.go). Their own children are settled now.
		if err := s.settleChildrenOf(ctx, tx, look, finals, rows); err != nil {
			return err
		}
		d.add(ids, finals, rows)
		return nil
	}
	d := &laterEnds{}
	if err := s.settleChildrenOf(context.WithValue(ctx, laterEndsKey{}, d), tx, look, finals, rows); err != nil {
		return err
	}
	if len(d.ids) == 0 {
		return s.workflowsAfterFinal(ctx, tx, ids, finals, rows)
	}
	d.add(ids, finals, rows)
	slices.Sort(d.ids)
	return s.workflowsAfterFinal(ctx, tx, d.ids, d.finals, d.rows)
}

// laterEnds collects the tasks that the settlement of children ended
// (cancelled) within one afterFinal, for their workflows to be told at
// once with those of the tasks whose ends settled them.
type laterEnds struct {
	ids    []int64
	finals map[int64]contracts.Status
	rows   map[int64]rowState
}

type laterEndsKey struct{}

func (d *laterEnds) add(ids []int64, finals map[int64]contracts.Status, rows map[int64]rowState) {
	if d.finals == nil {
		d.finals, d.rows = map[int64]contracts.Status{}, map[int64]rowState{}
	}
	for _, id := range ids {
		if _, seen := d.finals[id]; !seen {
			d.ids = append(d.ids, id)
		}
		d.finals[id], d.rows[id] = finals[id], rows[id]
	}
}

// settleChildrenOf settles the children of the parents that just ended
// with finals: it locks the children, writes the parents' states onto
// their edges, and releases or cancels the children that can be. A child
// whose one parent is among these (dag_parents 1) is decided from the edge
// found here, without reading its edges again. The edges of parents whose
// locking read found them too (rowState.childrenRead, in locked) are not
// read again.
func (s *Store) settleChildrenOf(ctx context.Context, tx *sql.Tx, parents []int64, finals map[int64]contracts.Status, locked map[int64]rowState) error {
	if len(parents) == 0 {
		return nil
	}
	var found []foundEdge
	unread := parents[:0:0]
	for _, id := range parents {
		if st := locked[id]; st.childrenRead {
			found = append(found, st.children...)
		} else {
			unread = append(unread, id)
		}
	}
	if len(unread) > 0 {
		// A locking read, so that the transaction's snapshot is not taken
		// before the children are locked (see the package comment on
		// locks).
		read, err := parentEdges(ctx, tx, unread)
		if err != nil {
			return err
		}
		found = append(found, read...)
	}
	if len(found) == 0 {
		return nil
	}
	children := make([]int64, 0, len(found))
	for _, f := range found {
		children = append(children, f.child)
	}
	// A writer that collects its releases (TransferBatchDispatching) may
	// take them up itself: the children's locking read also reads what
	// their claims would, so that those need no read of their own.
	rows, err := lockRows(ctx, tx, children, releasesOf(ctx) != nil)
	if err != nil {
		return err
	}
	// A parent's state on its edges is for its children's other parents
	// (and for children whose shape is unknown); a parent whose children
	// each have it as their one parent settles them all here, and nothing
	// reads those edges again, so it is not written.
	shared := map[int64]bool{} // parents with a child that is not theirs alone
	for _, f := range found {
		if !rows[f.child].oneParent {
			shared[f.parent] = true
		}
	}
	byStatus := map[contracts.Status][]int64{}
	for _, id := range parents {
		if shared[id] {
			byStatus[finals[id]] = append(byStatus[finals[id]], id)
		}
	}
	for st, ps := range byStatus {
		if err := execIn(ctx, tx, `UPDATE task_dependencies FORCE INDEX (PRIMARY) SET parent_status = ? WHERE parent_id IN `, ps, string(st)); err != nil {
			return fmt.Errorf("record the end of %d parent(s): %w", len(ps), err)
		}
	}
	known := map[int64][]edge{}
	for _, f := range found {
		if rows[f.child].oneParent {
			known[f.child] = []edge{{parent: f.parent, cond: f.cond, parentStatus: finals[f.parent]}}
		}
	}
	return s.settleLocked(ctx, tx, children, rows, known)
}

// foundEdge is a parent's edge as the parent's final transfer finds it.
type foundEdge struct {
	parent, child int64
	cond          contracts.Condition
}

// parentEdges reads, with a share lock, the edges of parents to their
// children.
func parentEdges(ctx context.Context, tx *sql.Tx, parents []int64) ([]foundEdge, error) {
	var out []foundEdge
	for chunk := range slices.Chunk(parents, batchChunkRows) {
		in, args := inIDs(chunk)
		rows, err := tx.QueryContext(ctx, `SELECT parent_id, child_id, cond FROM task_dependencies FORCE INDEX (PRIMARY)
			WHERE parent_id IN (`+in+`) LOCK IN SHARE MODE`, args...)
		if err != nil {
			return nil, fmt.Errorf("find children: %w", err)
		}
		for rows.Next() {
			var f foundEdge
			var cond string
			if err := rows.Scan(&f.parent, &f.child, &cond); err != nil {
				rows.Close()
				return nil, fmt.Errorf("find children: %w", err)
			}
			f.cond = contracts.Condition(cond)
			out = append(out, f)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("find children: %w", err)
		}
	}
	return out, nil
}

// edge is one dependency of a child as settleChildren reads it.
type edge struct {
	parent       int64
	cond         contracts.Condition
	parentStatus contracts.Status
}

// settleChildren moves the SUSPEND tasks among ids whose parents have all
// ended: to READY when every condition is met, to CANCELLED, with a reason
// naming the parent and its state, when one never can be. The caller holds
// the children's row locks or takes them here (the transfer locks them).
func (s *Store) settleChildren(ctx context.Context, tx *sql.Tx, ids []int64) error {
	if len(ids) == 0 {
		return nil
	}
	rows, err := lockRows(ctx, tx, ids, false)
	if err != nil {
		return err
	}
	return s.settleLocked(ctx, tx, ids, rows, nil)
}

// settleLocked is settleChildren on rows the caller locked (lockRows):
// the final transfer of a parent locks its children once, and their
// settlement reads their states and due times from that lock. known holds
// the whole set of edges of children the caller has them for; the others'
// are read.
func (s *Store) settleLocked(ctx context.Context, tx *sql.Tx, ids []int64, rows map[int64]rowState, known map[int64][]edge) error {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var unknown []int64
	for _, id := range ids {
		if _, ok := known[id]; !ok && rows[id].status == contracts.StatusSuspend {
			unknown = append(unknown, id)
		}
	}
	edges := known
	if len(unknown) > 0 {
		read, err := childEdges(ctx, tx, unknown)
		if err != nil {
			return err
		}
		edges = read
		for id, es := range known {
			edges[id] = es
		}
	}
	now := s.now().UnixMilli()
	var chains [][]TransferParams
	var tids []int64
	culprits := map[int]int64{} // chain -> the parent that cancels it
	for _, id := range ids {
		if rows[id].status != contracts.StatusSuspend {
			continue
		}
		p, culprit, ok := decide(id, edges[id], now)
		if !ok {
			continue
		}
		if culprit != 0 {
			culprits[len(chains)] = culprit
		}
		chains = append(chains, []TransferParams{p})
		tids = append(tids, id)
	}
	if len(chains) == 0 {
		return nil
	}
	if err := nameCulprits(ctx, tx, chains, culprits); err != nil {
		return err
	}
	if err := s.releaseLocked(ctx, tx, chains, rows, now); err != nil {
		return fmt.Errorf("settle children: %w", err)
	}
	return nil
}

// releaseLocked applies chains, the settlement of SUSPEND tasks whose rows
// the caller locked (lockRows), giving every release its due time
// (fillDue). A release due at once goes out with route "dispatch", for the
// relay to dispatch with its event, unless the transaction collects its
// releases (TransferBatchDispatching): then it says "dispatched" and the
// collector lists it for its writer to send. A chain that loses is an
// error, since the caller checked the states under the locks.
func (s *Store) releaseLocked(ctx context.Context, tx *sql.Tx, chains [][]TransferParams, rows map[int64]rowState, nowMs int64) error {
	fillDue(chains, rows, nowMs)
	rel := releasesOf(ctx)
	var direct []int
	if rel != nil {
		for i, c := range chains {
			if c[0].Route == events.RouteDispatch {
				c[0].Route = events.RouteDispatched
				direct = append(direct, i)
			}
		}
	}
	out := make([]ChainResult, len(chains))
	if err := s.transferLockedTx(ctx, tx, chains, rows, out); err != nil {
		return err
	}
	for _, r := range out {
		if r.Err != nil {
			return r.Err
		}
	}
	for _, i := range direct {
		t := out[i].Results[0]
		rel.add(t.TaskID, rowState{traceParent: t.TraceParent, taskType: t.Type, attempt: t.Attempt,
			priority: t.Priority, next: t.NextRunTimeMs}, rows[t.TaskID].run)
	}
	return nil
}

// decide says what becomes of a SUSPEND child with edges: a transfer (and,
// for a cancellation, the parent that causes it), or false while a parent
// has not ended.
func decide(id int64, edges []edge, nowMs int64) (TransferParams, int64, bool) {
	var waiting bool
	for _, e := range edges {
		if e.parentStatus == "" {
			waiting = true
			continue
		}
		if !e.cond.Accepts(e.parentStatus) {
			return TransferParams{TaskID: id, From: contracts.StatusSuspend, To: contracts.StatusCancelled,
				Reason: fmt.Sprintf("parent %d ended %s; this task runs only when it %s",
					e.parent, e.parentStatus, conditionText(e.cond)),
				Actor: "dag"}, e.parent, true
		}
	}
	if waiting || len(edges) == 0 {
		return TransferParams{}, 0, false
	}
	return TransferParams{TaskID: id, From: contracts.StatusSuspend, To: contracts.StatusReady,
		Reason: "released: " + parentsEnded(edges), Actor: "dag"}, 0, true
}

// nameCulprits adds to each cancellation's reason what its parent is (its
// step key, its type), so that a person reads who, not only an ID.
func nameCulprits(ctx context.Context, tx *sql.Tx, chains [][]TransferParams, culprits map[int]int64) error {
	if len(culprits) == 0 {
		return nil
	}
	var ids []int64
	for _, id := range culprits {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	rows, err := tx.QueryContext(ctx, `SELECT t.id, t.task_type, COALESCE(ws.step_key, '') FROM tasks t FORCE INDEX (PRIMARY)
		LEFT JOIN workflow_steps ws ON ws.task_id = t.id WHERE t.id IN (`+marks(len(ids))+`)`, int64Args(ids)...)
	if err != nil {
		return fmt.Errorf("name parents: %w", err)
	}
	defer rows.Close()
	typeOf, stepOf := map[int64]string{}, map[int64]string{}
	for rows.Next() {
		var id int64
		var typ, step string
		if err := rows.Scan(&id, &typ, &step); err != nil {
			return fmt.Errorf("name parents: %w", err)
		}
		typeOf[id], stepOf[id] = typ, step
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("name parents: %w", err)
	}
	// Steps listed on their workflows' rows have no workflow_steps row.
	listed, err := listedStepKeys(ctx, tx, ids)
	if err != nil {
		return fmt.Errorf("name parents: %w", err)
	}
	maps.Copy(stepOf, listed)
	names := make(map[int64]string, len(typeOf))
	for id, typ := range typeOf {
		names[id] = "type " + typ
		if stepOf[id] != "" {
			names[id] = fmt.Sprintf("step %q, type %s", stepOf[id], typ)
		}
	}
	for i, parent := range culprits {
		if n, ok := names[parent]; ok {
			chains[i][0].Reason += " (parent: " + n + ")"
		}
	}
	return nil
}

// parentsEnded says how the parents ended: each by ID when they are few,
// counted by state when they are many (a fan-in of hundreds).
func parentsEnded(edges []edge) string {
	if len(edges) <= 8 {
		parts := make([]string, len(edges))
		for i, e := range edges {
			parts[i] = fmt.Sprintf("%d %s", e.parent, e.parentStatus)
		}
		return "parents ended (" + strings.Join(parts, ", ") + ")"
	}
	count := map[contracts.Status]int{}
	for _, e := range edges {
		count[e.parentStatus]++
	}
	var parts []string
	for _, st := range finalStates {
		if count[st] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", count[st], st))
		}
	}
	return fmt.Sprintf("all %d parents ended (%s)", len(edges), strings.Join(parts, ", "))
}

func conditionText(c contracts.Condition) string {
	switch c {
	case contracts.WhenFailure:
		return "fails"
	case contracts.WhenAlways:
		return "ends"
	}
	return "succeeds"
}

// fillDue gives every release its due time: the child's own (a step with
// a delay), read from its locked row, or now, dispatched at once when it
// is due.
func fillDue(chains [][]TransferParams, rows map[int64]rowState, nowMs int64) {
	for _, c := range chains {
		p := &c[0]
		if p.To != contracts.StatusReady {
			continue
		}
		next := max(rows[p.TaskID].next, nowMs)
		p.NextRunTimeMs = &next
		if next <= nowMs {
			p.Route = events.RouteDispatch
		}
	}
}

// childEdges reads the dependencies of children with a plain read (see
// the package comment on locks).
func childEdges(ctx context.Context, tx *sql.Tx, children []int64) (map[int64][]edge, error) {
	out := make(map[int64][]edge, len(children))
	for chunk := range slices.Chunk(children, batchChunkRows) {
		in, args := inIDs(chunk)
		rows, err := tx.QueryContext(ctx, `SELECT child_id, parent_id, cond, parent_status FROM task_dependencies
			WHERE child_id IN (`+in+`) ORDER BY child_id, parent_id`, args...)
		if err != nil {
			return nil, fmt.Errorf("read dependencies: %w", err)
		}
		for rows.Next() {
			var child int64
			var e edge
			var cond string
			var ps sql.NullString
			if err := rows.Scan(&child, &e.parent, &cond, &ps); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read dependencies: %w", err)
			}
			e.cond, e.parentStatus = contracts.Condition(cond), contracts.Status(ps.String)
			out[child] = append(out[child], e)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read dependencies: %w", err)
		}
	}
	return out, nil
}

// SuspendedScan is where ReconcileSuspended reads on from: the status
// index's position (due time, ID) of the last SUSPEND task a pass read;
// the zero value starts from the first.
type SuspendedScan struct{ NextRunTimeMs, ID int64 }

// suspendedWindow is how many SUSPEND tasks a pass of ReconcileSuspended
// reads at most, per task it may settle: a pass costs the same whether a
// thousand or a million children wait for their parents.
const suspendedWindow = 10

// suspendedSQL reads a window of SUSPEND tasks in the status index's order
// from a position and says of each whether it is stranded: a dag task,
// untouched for a while, whose parents have all ended.
var suspendedSQL = `SELECT c.id, c.next_run_time,
	  c.dag = 1 AND c.updated_at < NOW(3) - INTERVAL ? * 1000 MICROSECOND
	  AND EXISTS (SELECT 1 FROM task_dependencies d WHERE d.child_id = c.id)
	  AND NOT EXISTS (SELECT 1 FROM task_dependencies d JOIN tasks p ON p.id = d.parent_id
	                  WHERE d.child_id = c.id AND p.status NOT IN (` + marks(len(finalStates)) + `))
	FROM (SELECT id, next_run_time, dag, updated_at FROM tasks FORCE INDEX (idx_tasks_status_next_run)
	      WHERE status = 'SUSPEND' AND (next_run_time > ? OR (next_run_time = ? AND id > ?))
	      ORDER BY next_run_time, id LIMIT ?) c`

// ReconcileSuspended re-settles up to limit SUSPEND tasks, untouched for
// olderThanMs, whose parents have all ended: the parents' rows are the
// truth, copied onto the dependency rows, and the child is settled as the
// parents' own transfers would have. It reads a window of SUSPEND tasks
// from scan on, in the status index's order (one search over every
// SUSPEND task walked the whole table by its primary key, finished tasks
// included), and returns how many it moved and where the next pass goes
// on: the zero SuspendedScan once it read to the end.
func (s *Store) ReconcileSuspended(ctx context.Context, olderThanMs int64, limit int, scan SuspendedScan) (int, SuspendedScan, error) {
	limit = max(limit, 1)
	window := limit * suspendedWindow
	args := append([]any{olderThanMs}, finalStateArgs...)
	if scan == (SuspendedScan{}) {
		scan.NextRunTimeMs = -1 << 62
	}
	args = append(args, scan.NextRunTimeMs, scan.NextRunTimeMs, scan.ID, window)
	rows, err := s.db.QueryContext(ctx, suspendedSQL, args...)
	if err != nil {
		return 0, scan, fmt.Errorf("find stranded children: %w", err)
	}
	var found []SuspendedScan // the stranded ones
	read, last := 0, SuspendedScan{}
	for rows.Next() {
		var c SuspendedScan
		var stranded sql.NullBool
		if err := rows.Scan(&c.ID, &c.NextRunTimeMs, &stranded); err != nil {
			rows.Close()
			return 0, scan, fmt.Errorf("find stranded children: %w", err)
		}
		if read++; read == 1 || compareScans(last, c) < 0 {
			last = c
		}
		if stranded.Bool {
			found = append(found, c)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, scan, fmt.Errorf("find stranded children: %w", err)
	}
	next := last
	if read < window {
		next = SuspendedScan{} // read to the end: the next pass starts over
	}
	slices.SortFunc(found, compareScans)
	if len(found) > limit {
		// The rest are read again by the next pass, which goes on from
		// the last one taken.
		found = found[:limit]
		next = found[limit-1]
	}
	ids := make([]int64, len(found))
	for i, c := range found {
		ids[i] = c.ID
	}
	slices.Sort(ids)
	moved := 0
	for _, id := range ids {
		ok, err := s.reconcileChild(ctx, id)
		if err != nil {
			return moved, next, err
		}
		if ok {
			moved++
		}
	}
	return moved, next, nil
}

// compareScans orders positions as the status index does.
func compareScans(a, b SuspendedScan) int {
	return cmp.Or(cmp.Compare(a.NextRunTimeMs, b.NextRunTimeMs), cmp.Compare(a.ID, b.ID))
}

// reconcileChild settles one stranded child in a transaction of its own.
func (s *Store) reconcileChild(ctx context.Context, id int64) (bool, error) {
	moved := false
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		st, err := lockStatuses(ctx, tx, []int64{id})
		if err != nil || st[id] != contracts.StatusSuspend {
			return err
		}
		args := append([]any{id}, finalStateArgs...)
		if _, err := tx.ExecContext(ctx, `UPDATE task_dependencies d JOIN tasks p ON p.id = d.parent_id
			SET d.parent_status = p.status WHERE d.child_id = ? AND p.status IN (`+marks(len(finalStates))+`)`, args...); err != nil {
			return fmt.Errorf("copy parents' states to task %d: %w", id, err)
		}
		if err := s.settleChildren(ctx, tx, []int64{id}); err != nil {
			return err
		}
		after, err := lockStatuses(ctx, tx, []int64{id})
		moved = err == nil && after[id] != contracts.StatusSuspend
		return err
	})
	if err != nil {
		return false, fmt.Errorf("reconcile task %d: %w", id, err)
	}
	if moved {
		s.notify()
	}
	return moved, nil
}

// Parents returns the dependencies of a task, parents in id order.
func (s *Store) Parents(ctx context.Context, id int64) ([]Dependency, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT parent_id, cond FROM task_dependencies WHERE child_id = ? ORDER BY parent_id`, id)
	if err != nil {
		return nil, fmt.Errorf("parents of task %d: %w", id, err)
	}
	defer rows.Close()
	var out []Dependency
	for rows.Next() {
		var d Dependency
		var c string
		if err := rows.Scan(&d.ParentID, &c); err != nil {
			return nil, fmt.Errorf("parents of task %d: %w", id, err)
		}
		d.When = contracts.Condition(c)
		out = append(out, d)
	}
	return out, rows.Err()
}

// execIn runs head followed by "(ids...)" in chunks; args fill head's own
// placeholders.
func execIn(ctx context.Context, tx *sql.Tx, head string, ids []int64, args ...any) error {
	_, err := execInCount(ctx, tx, head, ids, args...)
	return err
}

// execInCount is execIn, returning how many rows changed.
func execInCount(ctx context.Context, tx *sql.Tx, head string, ids []int64, args ...any) (int64, error) {
	var n int64
	for chunk := range slices.Chunk(ids, batchChunkRows) {
		in, ids := inIDs(chunk)
		res, err := tx.ExecContext(ctx, head+"("+in+")", append(slices.Clone(args), ids...)...)
		if err != nil {
			return n, err
		}
		k, err := res.RowsAffected()
		if err != nil {
			return n, err
		}
		n += k
	}
	return n, nil
}

// queryPairs runs head "(ids...)" tail in chunks and returns the first two
// columns of every row.
func queryPairs(ctx context.Context, tx *sql.Tx, head string, ids []int64, tail string) ([][2]int64, error) {
	var out [][2]int64
	for chunk := range slices.Chunk(ids, batchChunkRows) {
		in, args := inIDs(chunk)
		rows, err := tx.QueryContext(ctx, head+"("+in+")"+tail, args...)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var p [2]int64
			if err := rows.Scan(&p[0], &p[1]); err != nil {
				rows.Close()
				return nil, err
			}
			out = append(out, p)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func scanIDs(rows *sql.Rows) ([]int64, error) {
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}
