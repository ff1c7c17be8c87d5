package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oklog/ulid/v2"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/tracing"
)

// TransferParams describe one state change.
type TransferParams struct {
	TaskID int64
	From   contracts.Status
	To     contracts.Status
	Reason string
	// Actor overrides the store's default actor for the history row.
	Actor string
	// Attempt, when set, fences the write: it applies only while the task's
	// attempt is still this value, so a zombie executor cannot overwrite a
	// newer attempt's outcome.
	Attempt *int
	// Claim starts a new attempt: attempt+1, executor_addr = Executor and a
	// fresh heartbeat. Used for READY -> RUNNING.
	Claim    bool
	Executor string
	// SkipRun, on a claim, leaves RunFields out of the result: the
	// claimant read them before (an executor's fused claim, written with
	// the attempt's outcome), so the locking read need not fetch the
	// payload again.
	SkipRun bool
	// ExecVersion, on a claim, records the claimant's version on the task
	// (empty: left as it is).
	ExecVersion string
	// LastError, when set, is stored on the task.
	LastError *string
	// NextRunTimeMs, when set, becomes the task's due time.
	NextRunTimeMs *int64
	// ClearExecutor empties executor_addr and the heartbeat.
	ClearExecutor bool
	// Route, for a transfer to READY, says who takes the task on from its
	// event (events.Route): the timer by default.
	Route events.Route
	// IncrementRetry counts one more retry (FAILED/TIMEOUT -> RETRYING);
	// ResetRetries starts a fresh round (an operator's re-run).
	IncrementRetry bool
	ResetRetries   bool
	// RecordRejection makes a fenced-off write leave a trace: when the
	// transfer loses because the attempt is stale or the task moved on, a
	// history row (from = to = the current state) and a task.rejected event
	// say who tried what, and why it was refused.
	RecordRejection bool
	// ReadyWhenDue, on a transfer to RETRYING, moves the task on to READY
	// in the same transaction when its new due time has passed by the time
	// the transaction writes (a backoff shorter than the way to the
	// commit): due at once, it is dispatched by the writer when it
	// collects releases (TransferBatchDispatching), else by the relay with
	// its event, and the timer never indexes it (its RETRYING event goes
	// on events.SubjectRetryingNow).
	ReadyWhenDue bool
	// DueByMs, when set, makes the transfer apply only while the task's
	// next_run_time is at most this: a dispatch or due command built from
	// what the task looked like when it was indexed (no read of the row)
	// then cannot start a task whose due time has moved later since; it
	// fails with a *ConflictError whose NotDue is set.
	DueByMs *int64
	// Also runs extra writes inside the transfer's transaction, after the
	// history row; an error rolls all of it back.
	Also func(ctx context.Context, tx Execer) error
}

// TransferResult is what the task looks like after a transfer.
type TransferResult struct {
	TaskID        int64
	Type          string
	Priority      contracts.Priority
	Attempt       int
	NextRunTimeMs int64
	EventID       string
	// TraceParent is the task's stored trace context (tracing).
	TraceParent string
	// Run is what an executor needs to run the task, set for claims
	// (TransferParams.Claim): read by the same locking read that checks the
	// row, so a lean dispatch costs no query of its own.
	Run *RunFields
}

// RunFields are the task's columns an attempt runs with.
type RunFields struct {
	Payload    []byte
	TimeoutMs  int64
	RetryCount int
	MaxRetries int
	// TraceParent is the task's stored trace context (tracing).
	TraceParent string
}

// Transfer is the one function that changes a task's state. In a single
// transaction it compare-and-sets the row (status = from [and attempt = the
// given one]) and inserts the history row, from which the relay publishes
// the event (RelayHistory). A lost
// race returns a *ConflictError; a change the transition table forbids
// returns an *IllegalTransitionError without touching the database.
func (s *Store) Transfer(ctx context.Context, p TransferParams) (*TransferResult, error) {
	res, err := s.TransferChain(ctx, p)
	if err != nil {
		return nil, err
	}
	return res[len(res)-1], nil
}

// TransferChain performs several transfers of one or more tasks in one
// transaction (FAILED -> RETRYING right after RUNNING -> FAILED, say): all
// of them commit, each with its history row and event, or none does.
func (s *Store) TransferChain(ctx context.Context, steps ...TransferParams) ([]*TransferResult, error) {
	out, err := s.TransferBatch(ctx, [][]TransferParams{steps})
	if err != nil {
		return nil, err
	}
	return out[0].Results, out[0].Err
}

// ChainResult is the fate of one chain of a batch: Results when it
// committed, otherwise Err (a *ConflictError, an *IllegalTransitionError or
// an ErrNotFound) and nothing of it was written.
type ChainResult struct {
	Results []*TransferResult
	Err     error
}

// TransferBatch applies many independent chains in one transaction: the
// hot path's claims and outcomes, a few hundred at a time, cost one commit
// instead of one each. Each chain commits whole or not at all, and a chain
// that loses its compare-and-set does not stop the others. The rows are
// locked in primary-key order, checked, and changed by as few statements
// as their shapes allow; history rows go in multi-row inserts.
// The returned error means the transaction failed and nothing was written.
func (s *Store) TransferBatch(ctx context.Context, chains [][]TransferParams) ([]ChainResult, error) {
	return s.transferBatch(ctx, chains, nil)
}

// TransferBatchDispatching is TransferBatch for a writer that dispatches
// itself, right after the commit, the tasks the transaction makes READY and
// due at once as a consequence of its chains: children a final transfer
// releases, compensations a failed step starts, in the same transaction.
// Their READY rows say events.RouteDispatched, so the relay publishes
// their events and leaves their dispatch to the caller; released lists
// them (nothing when the transaction did not commit). Why: the relay
// publishes rows in ID order, so a release waits for every other open
// transaction that took a lower history ID (see Sender in package
// dispatch for who else dispatches directly). A release the caller does
// not send is re-driven by the reconciler.
func (s *Store) TransferBatchDispatching(ctx context.Context, chains [][]TransferParams) (out []ChainResult, released []Released, err error) {
	rel := &releases{}
	out, err = s.transferBatch(ctx, chains, rel)
	if err != nil {
		return nil, nil, err
	}
	return out, rel.tasks, nil
}

// Released is a task a transaction made READY and due at once, to be
// dispatched by its writer: its READY event as the relay would see it
// (route "dispatch") and its trace context.
type Released struct {
	Ref         events.TaskRef
	TraceParent string
	// Run is what a claim of the task reads, as the release's own locking
	// read found it (a child released by its parent's end), or nil: an
	// executor taking the task up itself needs no read of its own.
	Run *RunFields
}

// releases collects, for TransferBatchDispatching, the tasks its
// transaction made READY and due at once beyond the chains themselves.
// It rides on the transaction's context: the releases are decided deep in
// the settlement of children and workflows, which every final transfer
// runs, and only this one caller asks for them.
type releases struct {
	tasks []Released
}

// add lists task id, left READY as after says, for its writer to send,
// with what a claim of it reads when the transaction read that (run).
func (r *releases) add(id int64, after rowState, run *RunFields) {
	r.tasks = append(r.tasks, Released{TraceParent: after.traceParent, Run: run, Ref: events.TaskRef{TaskID: id,
		Type: after.taskType, To: contracts.StatusReady, Attempt: after.attempt, Priority: after.priority,
		NextRunTimeMs: after.next, Route: events.RouteDispatch}})
}

type releasesKey struct{}

// releasesOf returns the collector of ctx's transaction, or nil.
func releasesOf(ctx context.Context) *releases {
	r, _ := ctx.Value(releasesKey{}).(*releases)
	return r
}

func (s *Store) transferBatch(ctx context.Context, chains [][]TransferParams, rel *releases) ([]ChainResult, error) {
	if rel != nil {
		ctx = context.WithValue(ctx, releasesKey{}, rel)
	}
	out := make([]ChainResult, len(chains))
	ids := make([]int64, 0, len(chains))
	for i, steps := range chains {
		if len(steps) == 0 {
			return nil, fmt.Errorf("transfer batch: chain %d is empty", i)
		}
		for _, p := range steps {
			if !contracts.CanTransition(p.From, p.To) || p.From == contracts.StatusNone {
				out[i].Err = &IllegalTransitionError{From: p.From, To: p.To}
				break
			}
			ids = append(ids, p.TaskID)
		}
	}
	if len(ids) == 0 {
		return out, nil
	}
	var err error
	began := time.Now()
	for try := 0; ; try++ {
		err = s.inTx(ctx, func(tx *sql.Tx) error {
			if rel != nil {
				rel.tasks = rel.tasks[:0] // a deadlock's victim starts over
			}
			return withDeferredHistory(ctx, tx, func(ctx context.Context) error {
				return s.transferBatchTx(ctx, tx, chains, ids, out)
			})
		})
		// Batches that lock overlapping rows can still deadlock with other
		// writers; the victim rolled back whole and simply goes again.
		if err == nil || !IsDeadlock(err) || try == 2 || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return nil, err
	}
	if tracing.Enabled() {
		s.traceTransfers(ctx, chains, out, began)
	}
	wrote := false
	for i, steps := range chains {
		var ce *ConflictError
		switch {
		case out[i].Err == nil:
			wrote = true
			for _, p := range steps {
				metrics.Transfers.WithLabelValues(string(p.To)).Inc()
			}
		case errors.As(out[i].Err, &ce):
			metrics.TransferConflicts.WithLabelValues(string(ce.To)).Inc()
			for _, p := range steps {
				if p.RecordRejection && p.TaskID == ce.TaskID && p.To == ce.To {
					s.recordRejection(ctx, p, ce)
				}
			}
		}
	}
	if wrote {
		s.notify()
	}
	return out, nil
}

// recordRejection writes the trace of a refused write in its own
// transaction; failing to write it loses only the trace, so errors are
// swallowed.
func (s *Store) recordRejection(ctx context.Context, p TransferParams, ce *ConflictError) {
	want := "?"
	if p.Attempt != nil {
		want = strconv.Itoa(*p.Attempt)
	}
	reason := fmt.Sprintf("rejected %s->%s from attempt %s: the task is %s at attempt %d (%s)",
		p.From, p.To, want, ce.Actual, ce.ActualAttempt, p.Reason)
	if ce.NotDue {
		reason = fmt.Sprintf("rejected %s->%s: the task is due at %d, after %d (%s)",
			p.From, p.To, ce.DueAtMs, ce.DueByMs, p.Reason)
	}
	err := s.inTx(context.WithoutCancel(ctx), func(tx *sql.Tx) error {
		var taskType string
		var prio int
		var next int64
		if err := tx.QueryRowContext(ctx, `SELECT task_type, priority, next_run_time FROM tasks WHERE id = ?`, p.TaskID).
			Scan(&taskType, &prio, &next); err != nil {
			return err
		}
		_, err := recordMany(ctx, tx, []transferRecord{{
			taskID: p.TaskID, taskType: taskType, from: ce.Actual, to: ce.Actual, attempt: ce.ActualAttempt,
			priority: contracts.PriorityFromRank(prio), nextRunTimeMs: next, reason: reason,
			actor: s.actorOr(p.Actor), at: s.now().UTC(), rejected: true,
		}})
		return err
	})
	if err == nil {
		s.notify()
	}
}

// transferTx performs one transfer inside the caller's transaction.
func (s *Store) transferTx(ctx context.Context, tx *sql.Tx, p TransferParams) (*TransferResult, error) {
	if !contracts.CanTransition(p.From, p.To) || p.From == contracts.StatusNone {
		return nil, &IllegalTransitionError{From: p.From, To: p.To}
	}
	out := make([]ChainResult, 1)
	if err := s.transferBatchTx(ctx, tx, [][]TransferParams{{p}}, []int64{p.TaskID}, out); err != nil {
		return nil, err
	}
	if out[0].Err != nil {
		return nil, out[0].Err
	}
	return out[0].Results[0], nil
}

// rowState is a locked task row as the batch sees it.
type rowState struct {
	taskType string
	priority contracts.Priority
	attempt  int
	// retries is retry_count as locked: with attempt it tells a task
	// re-run from a dead letter (firstEnd).
	retries int
	next    int64
	status  contracts.Status
	dag     bool // in a DAG: a final state settles children (afterFinal)
	// leaf and oneParent are the DAG shape recorded at creation (migration
	// 0018), false when unknown: no task depends on this one, so its end
	// looks for no children; it has exactly one parent, so that parent's
	// end settles it without reading its edges.
	leaf, oneParent bool
	// workflow and role are the task's workflow and its part in it
	// (migration 0019), when roleKnown; otherwise its workflow is looked
	// up when it ends.
	workflow  int64
	role      int
	roleKnown bool
	// childrenRead marks a row whose edges to its children the locking
	// read found too (lockRowsFor), children: its end settles them from
	// these instead of reading them again.
	childrenRead bool
	children     []foundEdge
	run          *RunFields // only when the batch claims
	// traceParent is the task's trace context, which its history rows and
	// transfer spans carry.
	traceParent string
}

// plannedStep is a winning step with the row it leaves behind.
type plannedStep struct {
	p     TransferParams
	after rowState
	// added marks a step the batch added after its chain's step (a
	// backoff that had elapsed: backoffElapsed), which has no result.
	added bool
}

func (s *Store) transferBatchTx(ctx context.Context, tx *sql.Tx, chains [][]TransferParams, ids []int64, out []ChainResult) error {
	claims := false
	for _, steps := range chains {
		for _, p := range steps {
			claims = claims || (p.Claim && !p.SkipRun)
		}
	}
	rows, err := lockRowsFor(ctx, tx, ids, claims, endsAny(chains))
	if err != nil {
		return err
	}
	return s.transferLockedTx(ctx, tx, chains, rows, out)
}

// endsAny says whether a step of chains leaves its task final: then the
// batch's locking read also finds the children of the DAG tasks it locks
// (lockRowsFor), which their ends settle.
func endsAny(chains [][]TransferParams) bool {
	for _, steps := range chains {
		for _, p := range steps {
			if isFinal(p.To) {
				return true
			}
		}
	}
	return false
}

// transferLockedTx is transferBatchTx on rows the caller locked already
// (lockRows, with RunFields when a chain claims); it updates rows to what
// the batch leaves behind.
func (s *Store) transferLockedTx(ctx context.Context, tx *sql.Tx, chains [][]TransferParams, rows map[int64]rowState, out []ChainResult) error {
	at := s.now().UTC()
	// scratch and mine are reused by every chain.
	plan := make([]plannedStep, 0, len(chains))
	scratch := map[int64]rowState{}
	var mine []plannedStep
	for i, steps := range chains {
		out[i].Results = nil
		if _, illegal := out[i].Err.(*IllegalTransitionError); illegal {
			continue
		}
		out[i].Err = nil
		// Steps see the rows as earlier winners left them; a chain applies
		// to a scratch copy and is kept only if every step holds.
		clear(scratch)
		mine = mine[:0]
		for _, p := range steps {
			st, ok := scratch[p.TaskID]
			if !ok {
				st, ok = rows[p.TaskID]
			}
			if !ok {
				out[i].Err = fmt.Errorf("task %d: %w", p.TaskID, ErrNotFound)
				break
			}
			if st.status != p.From || (p.Attempt != nil && st.attempt != *p.Attempt) {
				ce := &ConflictError{TaskID: p.TaskID, From: p.From, To: p.To, Actual: st.status,
					ActualAttempt: st.attempt, Fenced: p.Attempt != nil}
				if p.Attempt != nil {
					ce.WantAttempt = *p.Attempt
				}
				out[i].Err = ce
				break
			}
			if p.DueByMs != nil && st.next > *p.DueByMs {
				out[i].Err = &ConflictError{TaskID: p.TaskID, From: p.From, To: p.To, Actual: st.status,
					ActualAttempt: st.attempt, NotDue: true, DueAtMs: st.next, DueByMs: *p.DueByMs}
				break
			}
			st.status = p.To
			if p.Claim {
				st.attempt++
			}
			if p.NextRunTimeMs != nil {
				st.next = *p.NextRunTimeMs
			}
			ps := plannedStep{p: p, after: st}
			if retrying, ready, ok := backoffElapsed(ps, at.UnixMilli(), releasesOf(ctx) != nil); ok {
				mine = append(mine, retrying, ready)
				st = ready.after
			} else {
				mine = append(mine, ps)
			}
			scratch[p.TaskID] = st
		}
		if out[i].Err != nil {
			continue
		}
		for id, st := range scratch {
			rows[id] = st
		}
		plan = append(plan, mine...)
	}
	if len(plan) == 0 {
		return nil
	}
	if err := updateRows(ctx, tx, plan); err != nil {
		return err
	}

	recs := make([]transferRecord, len(plan))
	for k, ps := range plan {
		recs[k] = transferRecord{
			taskID: ps.p.TaskID, taskType: ps.after.taskType, from: ps.p.From, to: ps.p.To,
			attempt: ps.after.attempt, priority: ps.after.priority, nextRunTimeMs: ps.after.next,
			reason: ps.p.Reason, actor: s.actorOr(ps.p.Actor), at: at, route: readyRoute(ps.p.To, ps.p.Route),
			traceParent: ps.after.traceParent,
		}
	}
	eventIDs, err := recordMany(ctx, tx, recs)
	if err != nil {
		return err
	}
	if err := chainResults(ctx, tx, chains, plan, eventIDs, out); err != nil {
		return err
	}
	return s.settleDAG(ctx, tx, plan, rows)
}

// chainResults fills each winning chain's results from its planned steps,
// runs their Also writes, and hands the steps the batch added (a backoff
// that had elapsed) to the transaction's collector of releases.
func chainResults(ctx context.Context, tx *sql.Tx, chains [][]TransferParams, plan []plannedStep, eventIDs []string, out []ChainResult) error {
	rel := releasesOf(ctx)
	k := 0
	for i, steps := range chains {
		if out[i].Err != nil {
			continue
		}
		out[i].Results = make([]*TransferResult, len(steps))
		for j := range steps {
			ps := plan[k]
			out[i].Results[j] = &TransferResult{TaskID: ps.p.TaskID, Type: ps.after.taskType,
				Priority: ps.after.priority, Attempt: ps.after.attempt, NextRunTimeMs: ps.after.next,
				EventID: eventIDs[k], TraceParent: ps.after.traceParent}
			if ps.p.Claim {
				out[i].Results[j].Run = ps.after.run
			}
			if ps.p.Also != nil {
				if err := ps.p.Also(ctx, tx); err != nil {
					return fmt.Errorf("transfer task %d: %w", ps.p.TaskID, err)
				}
			}
			k++
			for ; k < len(plan) && plan[k].added; k++ {
				if rel != nil {
					rel.add(plan[k].p.TaskID, plan[k].after, nil)
				}
			}
		}
	}
	return nil
}

// backoffElapsed returns, for a transfer to RETRYING that asks for it
// (ReadyWhenDue) and whose due time has passed at atMs, the RETRYING step
// marked as taken on at once (its event is not the timer's) and the step
// the batch adds: RETRYING -> READY, due at once, with route "dispatched"
// when the writer collects its releases, else "dispatch" (the relay's).
func backoffElapsed(ps plannedStep, atMs int64, collecting bool) (retrying, ready plannedStep, ok bool) {
	if !ps.p.ReadyWhenDue || ps.p.To != contracts.StatusRetrying || ps.after.next > atMs {
		return ps, ps, false
	}
	route := events.RouteDispatch
	if collecting {
		route = events.RouteDispatched
	}
	retrying = ps
	retrying.p.Route = events.RouteDispatched
	ready = plannedStep{added: true, after: ps.after, p: TransferParams{TaskID: ps.p.TaskID,
		From: contracts.StatusRetrying, To: contracts.StatusReady, Reason: "backoff elapsed", Actor: ps.p.Actor, Route: route}}
	ready.after.status = contracts.StatusReady
	return retrying, ready, true
}

// settleDAG hands the dag tasks the batch left final to afterFinal, in the
// same transaction: their children are released or cancelled with them.
func (s *Store) settleDAG(ctx context.Context, tx *sql.Tx, plan []plannedStep, rows map[int64]rowState) error {
	var finals map[int64]contracts.Status
	var leaves map[int64]bool
	for _, ps := range plan {
		st := rows[ps.p.TaskID]
		if !st.dag || !isFinal(st.status) {
			continue
		}
		if finals == nil {
			finals = map[int64]contracts.Status{}
		}
		finals[ps.p.TaskID] = st.status
		if st.leaf {
			if leaves == nil {
				leaves = map[int64]bool{}
			}
			leaves[ps.p.TaskID] = true
		}
	}
	if finals == nil {
		return nil
	}
	return s.afterFinal(ctx, tx, finals, leaves, rows)
}

// lockRows reads and locks the rows of ids; ascending primary-key order
// keeps concurrent batches from deadlocking on each other. withRun also
// reads what a claimed attempt runs with (RunFields).
func lockRows(ctx context.Context, tx *sql.Tx, ids []int64, withRun bool) (map[int64]rowState, error) {
	return lockRowsFor(ctx, tx, ids, withRun, false)
}

// lockRowsFor is lockRows for a batch that may end tasks (ending): the
// same statement then also reads, and locks, the edges of every DAG task
// that may have children (dag_children not 0) to its children, which its
// end settles (settleChildrenOf): one round trip fewer in the transaction
// that ends a parent, which its children's release waits for. An edge is
// inserted only under its parent's row lock, which this read takes first,
// so what it finds stays whole until the commit.
func lockRowsFor(ctx context.Context, tx *sql.Tx, ids []int64, withRun, ending bool) (map[int64]rowState, error) {
	uniq := slices.Clone(ids)
	slices.Sort(uniq)
	uniq = slices.Compact(uniq)
	rows := make(map[int64]rowState, len(uniq))
	cols := "t.id, t.task_type, t.priority, t.attempt, t.retry_count, t.next_run_time, t.status, t.dag, t.trace_parent, t.dag_children, t.dag_parents, t.workflow_id, t.workflow_role"
	if withRun {
		cols += ", t.payload, t.timeout_ms, t.max_retry_count"
	}
	from := "tasks t FORCE INDEX (PRIMARY)"
	if ending {
		cols += ", d.child_id, d.cond"
		from += ` LEFT JOIN task_dependencies d FORCE INDEX (PRIMARY)
			ON d.parent_id = t.id AND t.dag = 1 AND (t.dag_children IS NULL OR t.dag_children <> 0)`
	}
	for chunk := range slices.Chunk(uniq, batchChunkRows) {
		in, args := inIDs(chunk)
		r, err := tx.QueryContext(ctx, `SELECT `+cols+`
			FROM `+from+` WHERE t.id IN (`+in+`) ORDER BY t.id FOR UPDATE`, args...)
		if err != nil {
			return nil, fmt.Errorf("lock tasks for transfer: %w", err)
		}
		for r.Next() {
			var (
				id     int64
				st     rowState
				prio   int
				status string
				tp     sql.NullString
				kids   sql.NullInt16
				heads  sql.NullInt16
				wf     sql.NullInt64
				role   sql.NullInt16
				child  sql.NullInt64
				cond   sql.NullString
			)
			dest := []any{&id, &st.taskType, &prio, &st.attempt, &st.retries, &st.next, &status, &st.dag, &tp, &kids, &heads, &wf, &role}
			if withRun {
				st.run = &RunFields{}
				dest = append(dest, &st.run.Payload, &st.run.TimeoutMs, &st.run.MaxRetries)
			}
			if ending {
				dest = append(dest, &child, &cond)
			}
			if err := r.Scan(dest...); err != nil {
				r.Close()
				return nil, fmt.Errorf("lock tasks for transfer: %w", err)
			}
			if prev, seen := rows[id]; seen {
				// The join repeats a task's columns for each of its edges.
				st = prev
			} else {
				st.priority = contracts.PriorityFromRank(prio)
				st.status = contracts.Status(status)
				st.traceParent = tp.String
				st.leaf = kids.Valid && kids.Int16 == 0
				st.oneParent = heads.Valid && heads.Int16 == 1
				st.workflow, st.role, st.roleKnown = wf.Int64, int(role.Int16), role.Valid
				if st.run != nil {
					st.run.TraceParent, st.run.RetryCount = tp.String, st.retries
				}
				// The join's condition: its edges were read, if any.
				st.childrenRead = ending && st.dag && !st.leaf
			}
			if child.Valid {
				st.children = append(st.children, foundEdge{parent: id, child: child.Int64, cond: contracts.Condition(cond.String)})
			}
			rows[id] = st
		}
		if err := r.Close(); err != nil {
			return nil, fmt.Errorf("lock tasks for transfer: %w", err)
		}
		if err := r.Err(); err != nil {
			return nil, fmt.Errorf("lock tasks for transfer: %w", err)
		}
	}
	return rows, nil
}

// assign is one column a step sets besides its status: col = expr, with
// expr's arguments.
type assign struct {
	col, expr string
	args      []any
}

// assignsOf is what a step changes on its row besides its status.
func assignsOf(p TransferParams) []assign {
	var out []assign
	if p.Claim {
		// Sized for a claim and what may follow it, so the slice is
		// allocated once (every claimed run comes here).
		out = make([]assign, 0, 12)
		// The reaper judges heartbeats and run times against the
		// database's clock, so they are stamped with it too.
		// Progress belongs to the attempt that reported it: a new attempt
		// starts with none.
		out = append(out, assign{"attempt", "attempt + 1", nil}, assign{"executor_addr", "?", []any{p.Executor}},
			assign{"last_heartbeat_time", "NOW(3)", nil}, assign{"started_at", "NOW(3)", nil},
			assign{"progress_pct", "NULL", nil}, assign{"progress_message", "NULL", nil}, assign{"progress_at", "NULL", nil})
		if p.ExecVersion != "" {
			out = append(out, assign{"exec_version", "?", []any{p.ExecVersion}})
		}
	}
	if p.IncrementRetry {
		out = append(out, assign{"retry_count", "retry_count + 1", nil})
	}
	if p.ResetRetries {
		out = append(out, assign{"retry_count", "0", nil})
	}
	if p.ClearExecutor {
		out = append(out, assign{"executor_addr", "NULL", nil}, assign{"last_heartbeat_time", "NULL", nil})
	}
	if p.LastError != nil {
		out = append(out, assign{"last_error", "?", []any{Truncate(*p.LastError, 4000)}})
	}
	if p.NextRunTimeMs != nil {
		out = append(out, assign{"next_run_time", "?", []any{*p.NextRunTimeMs}})
	}
	return out
}

// rowUpdate is what one UPDATE does to one row: from its state before
// (checked) to its state after, with the other columns it sets.
type rowUpdate struct {
	id       int64
	from, to contracts.Status
	assigns  []assign
	layer    int // the row's how-many-th update in the batch
	set      string
	args     []any
}

// rowUpdates turns the planned steps into one UPDATE per row: a row's
// steps in a batch (a fused claim and its outcome: READY->RUNNING,
// RUNNING->SUCCESS) take it from the first step's state to the last's,
// each column set to what the last step that sets it says. A step that
// sets a column from its own value (attempt + 1) after an earlier step
// set it too starts a second update of the row, since one statement
// would read the value from before both.
func rowUpdates(plan []plannedStep) []rowUpdate {
	var out []rowUpdate
	last := make(map[int64]int, len(plan)) // row -> its open update in out
	for _, ps := range plan {
		i, open := last[ps.p.TaskID]
		add := assignsOf(ps.p)
		if open && !mergeable(out[i].assigns, add) {
			open = false
		}
		if !open {
			layer := 0
			if j, seen := last[ps.p.TaskID]; seen {
				layer = out[j].layer + 1
			}
			out = append(out, rowUpdate{id: ps.p.TaskID, from: ps.p.From, to: ps.p.To, layer: layer})
			i = len(out) - 1
			last[ps.p.TaskID] = i
		}
		u := &out[i]
		u.to = ps.p.To
		if len(u.assigns) == 0 {
			u.assigns = add // the step's own, fresh from assignsOf
			continue
		}
		for _, a := range add {
			if k := slices.IndexFunc(u.assigns, func(b assign) bool { return b.col == a.col }); k >= 0 {
				u.assigns[k] = a
			} else {
				u.assigns = append(u.assigns, a)
			}
		}
	}
	for i := range out {
		out[i].set, out[i].args = foldSet(out[i : i+1])
	}
	return out
}

// mergeable reports whether add can join an update that sets have: no
// column of add reads a value that have already changed.
func mergeable(have, add []assign) bool {
	for _, a := range add {
		if strings.Contains(a.expr, a.col) && slices.ContainsFunc(have, func(b assign) bool { return b.col == a.col }) {
			return false
		}
	}
	return true
}

// updateRows writes the planned steps, one UPDATE per row (rowUpdates),
// folding rows changed in the same way into one UPDATE ... WHERE id IN (a
// batch of fused claims and outcomes costs one statement per kind of
// outcome; see updateStatements). A row's updates keep their order (by
// layer); rows are independent of one another. The rows are locked and
// were checked, so each must be in the update's from state; a row that is
// not (a bug) gets a NULL status, which strict mode refuses, and the error
// rolls the batch back. plan is left as it is (its order is the history
// rows').
func updateRows(ctx context.Context, tx *sql.Tx, plan []plannedStep) error {
	for _, st := range updateStatements(plan) {
		if _, err := tx.ExecContext(ctx, st.query, st.args...); err != nil {
			return fmt.Errorf("transfer %d task(s) %s->%s: %w", st.rows, st.from, st.to, err)
		}
	}
	return nil
}

// updateStatement is one UPDATE of updateRows.
type updateStatement struct {
	query    string
	args     []any
	rows     int
	from, to contracts.Status
}

// updateStatements folds the row updates of plan into statements: rows of
// one layer going the same way with the same columns set share one
// UPDATE. Where their values differ (each failed attempt's own due time
// and error), the column takes each row's value by its id (CASE id WHEN
// ... THEN ... END): a batch of failures that retry costs one statement,
// not one per task.
func updateStatements(plan []plannedStep) []updateStatement {
	ups := rowUpdates(plan)
	slices.SortStableFunc(ups, func(a, b rowUpdate) int {
		if a.layer != b.layer {
			return a.layer - b.layer
		}
		if c := strings.Compare(string(a.from)+">"+string(a.to), string(b.from)+">"+string(b.to)); c != 0 {
			return c
		}
		return strings.Compare(a.set, b.set)
	})
	var out []updateStatement
	for len(ups) > 0 {
		u := ups[0]
		n, own := 1, false // own: some row's values differ from u's
		for n < len(ups) && n < batchChunkRows && ups[n].layer == u.layer && ups[n].from == u.from && ups[n].to == u.to &&
			ups[n].set == u.set {
			if !own && !slices.Equal(ups[n].args, u.args) {
				if !byRow(u) {
					break
				}
				own = true
			}
			if own && n >= byIDRows {
				break
			}
			n++
		}
		// Padded to a size class with repeats of the last row, so that the
		// statement's text repeats (preparingConnector): a row named twice
		// in the IN list and the CASEs is still updated once, to its value.
		group := slices.Clone(ups[:n])
		for len(group) < classUp(n) {
			group = append(group, ups[n-1])
		}
		set, setArgs := foldSet(group)
		all := make([]any, 0, len(setArgs)+len(group)+2)
		all = append(all, string(u.from), string(u.to))
		all = append(all, setArgs...)
		for _, v := range group {
			all = append(all, v.id)
		}
		out = append(out, updateStatement{rows: n, from: u.from, to: u.to, args: all,
			query: "UPDATE tasks FORCE INDEX (PRIMARY) SET status = IF(status = ?, ?, NULL), " + set +
				" WHERE id IN (" + marks(len(group)) + ")"})
		ups = ups[n:]
	}
	return out
}

// byIDRows bounds the rows of a statement that sets a column by id: each
// row's CASE looks its id up among all of them. At 500 rows with two such
// columns one statement took 6.9 ms against 5.9 ms for five of 100 (and
// 35 ms for 500 of one row each, a round trip apiece).
const byIDRows = 100

// byRow reports whether every column u sets from an argument takes it
// plainly (col = ?), so that rows differing only in those values can take
// each its own in one statement.
func byRow(u rowUpdate) bool {
	for _, a := range u.assigns {
		if len(a.args) > 0 && (a.expr != "?" || len(a.args) != 1) {
			return false
		}
	}
	return true
}

// foldSet is the SET list (after the status) of one row, or of rows that
// set the same columns: a column every row sets to the same value is set
// once, one whose value differs takes each row's by its id.
func foldSet(group []rowUpdate) (string, []any) {
	u := group[0]
	parts := make([]string, 0, len(u.assigns)+1)
	parts = append(parts, "updated_at = NOW(3)")
	var args []any
	for k, a := range u.assigns {
		same := true
		for _, v := range group[1:] {
			if !slices.Equal(v.assigns[k].args, a.args) {
				same = false
				break
			}
		}
		if same {
			parts = append(parts, a.col+" = "+a.expr)
			args = append(args, a.args...)
			continue
		}
		var b strings.Builder
		b.WriteString(a.col + " = CASE id")
		for _, v := range group {
			b.WriteString(" WHEN ? THEN ?")
			args = append(args, v.id, v.assigns[k].args[0])
		}
		b.WriteString(" END")
		parts = append(parts, b.String())
	}
	return strings.Join(parts, ", "), args
}

type transferRecord struct {
	taskID        int64
	taskType      string
	from, to      contracts.Status
	attempt       int
	priority      contracts.Priority
	nextRunTimeMs int64
	reason        string
	actor         string
	at            time.Time
	// rejected marks the trace of a refused write: published on
	// task.rejected, not as a transfer.
	rejected bool
	route    events.Route
	// traceParent is the task's trace context (tracing), passed on in the
	// event's headers.
	traceParent string
}

func (s *Store) record(ctx context.Context, tx *sql.Tx, r transferRecord) error {
	_, err := s.recordTx(ctx, tx, r)
	return err
}

// recordTx writes the history row, whose event the relay publishes.
func (s *Store) recordTx(ctx context.Context, tx *sql.Tx, r transferRecord) (string, error) {
	ids, err := recordMany(ctx, tx, []transferRecord{r})
	if err != nil {
		return "", fmt.Errorf("task %d: %w", r.taskID, err)
	}
	return ids[0], nil
}

// outboxEvent is one row for the relay to publish.
type outboxEvent struct {
	ID            string
	Subject       string
	Type          string
	CorrelationID string
	Payload       []byte
}

// insertOutbox queues an event in the caller's transaction; the relay
// publishes it once the transaction commits. Events that are not task
// transfers (task type changes) go through here; transfers are published
// from their history rows.
func insertOutbox(ctx context.Context, tx Execer, e outboxEvent) error {
	if e.ID == "" {
		e.ID = ulid.Make().String()
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO outbox (event_id, subject, event_type, correlation_id, payload)
		VALUES (?, ?, ?, ?, ?)`, e.ID, e.Subject, e.Type, e.CorrelationID, e.Payload); err != nil {
		return fmt.Errorf("insert outbox event %s: %w", e.Subject, err)
	}
	return nil
}

// Truncate cuts s to at most n bytes, ending it with "..." when it was cut
// (and n leaves room for it), without splitting a UTF-8 sequence, which
// strict mode would refuse to store and a reader would see as garbage.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	ellipsis := "..."
	if n < len(ellipsis) {
		ellipsis = ""
	}
	cut := max(n-len(ellipsis), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + ellipsis
}
