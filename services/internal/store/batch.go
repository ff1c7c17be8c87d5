package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/oklog/ulid/v2"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/tracing"
)

// Bounds of one multi-row statement. Rows keep the statement text and the
// IN lists reasonable; bytes keep it, escaped, well under MySQL's default
// max_allowed_packet (16 MiB), since the driver sends it as one packet.
const (
	batchChunkRows  = 500
	batchChunkBytes = 4 << 20
)

// BatchResult is what CreateTasks did with one NewTask.
type BatchResult struct {
	// Task is the created task, or the existing task it was deduplicated
	// against.
	Task *Task
	// Deduplicated is true when a task of the same type with the same
	// biz_key existed already or was created by an earlier item of the same
	// call; nothing was written for this item.
	Deduplicated bool
}

// CreateTasks creates many tasks in one transaction: the task rows, then a
// history row (which carries its event) for each task really created, as
// CreateTask does for one. The unique index on (task_type, biz_key) decides
// deduplication, never a prior read: rows go in with a multi-row INSERT ...
// ON DUPLICATE KEY UPDATE that leaves an existing row as it is, and the IDs
// found afterwards are the ones created. A later item with the same type and biz_key as an earlier one is
// deduplicated against it. The results follow the input order. A snowflake
// collision fails the whole call with ErrIDTaken and writes nothing, so the
// caller retries with fresh IDs; so may it on IsDeadlock.
func (s *Store) CreateTasks(ctx context.Context, nts []NewTask) ([]BatchResult, error) {
	if len(nts) == 0 {
		return nil, nil
	}
	if err := checkNewTasks(nts); err != nil {
		return nil, err
	}
	var out []BatchResult
	began := time.Now()
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var err error
		out, err = s.createTasksTx(ctx, tx, nts)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("create %d tasks: %w", len(nts), err)
	}
	if tracing.Enabled() {
		s.traceCreations(ctx, nts, out, began)
	}
	s.countCreated(out)
	return out, nil
}

// createTasksTx is CreateTasks inside the caller's transaction: rows,
// history rows, and the dependencies of tasks with parents (linkParents).
func (s *Store) createTasksTx(ctx context.Context, tx *sql.Tx, nts []NewTask) ([]BatchResult, error) {
	out, created, err := s.insertTasksTx(ctx, tx, nts)
	if err != nil {
		return nil, err
	}
	if err := s.linkParents(ctx, tx, nts, created); err != nil {
		return nil, err
	}
	return out, nil
}

// insertTasksTx writes the rows and history rows of createTasksTx, and
// returns the set of IDs it created besides the results.
func (s *Store) insertTasksTx(ctx context.Context, tx *sql.Tx, nts []NewTask) ([]BatchResult, map[int64]bool, error) {
	at := s.now().UTC()
	created, err := insertTaskRows(ctx, tx, nts, at)
	if err != nil {
		return nil, nil, err
	}
	out, err := batchResults(ctx, tx, nts, created, at)
	if err != nil {
		return nil, nil, err
	}
	if _, err = recordMany(ctx, tx, s.creationRecords(nts, created, at)); err != nil {
		return nil, nil, err
	}
	return out, created, nil
}

// countCreated counts the created tasks of a call in the metrics and wakes
// the relay when there are any.
func (s *Store) countCreated(out []BatchResult) {
	created := 0
	for _, r := range out {
		if !r.Deduplicated {
			metrics.TransfersTo.With(string(r.Task.Status)).Inc()
			created++
		}
	}
	if created > 0 {
		s.notify()
	}
}

// creationRecords describes the first transfer of every created task, in
// input order, for its history row and event.
func (s *Store) creationRecords(nts []NewTask, created map[int64]bool, at time.Time) []transferRecord {
	recs := make([]transferRecord, 0, len(created))
	for _, nt := range nts {
		if created[nt.ID] {
			recs = append(recs, transferRecord{
				taskID: nt.ID, taskType: nt.Type, from: contracts.StatusNone, to: nt.Status,
				attempt: 0, priority: nt.Priority, nextRunTimeMs: nt.NextRunTimeMs,
				reason: nt.Reason, actor: s.actorOr(nt.Actor), at: at, route: readyRoute(nt.Status, nt.Route),
				traceParent: nt.TraceParent,
			})
		}
	}
	return recs
}

// checkNewTasks refuses, before any SQL runs, what the transaction could not
// sort out: a first state the transition table forbids, or two items sharing
// an ID, which would read as a collision.
func checkNewTasks(nts []NewTask) error {
	ids := make(map[int64]bool, len(nts))
	for _, nt := range nts {
		if !contracts.CanTransition(contracts.StatusNone, nt.Status) {
			return &IllegalTransitionError{From: contracts.StatusNone, To: nt.Status}
		}
		if ids[nt.ID] {
			return fmt.Errorf("create tasks: id %d given twice", nt.ID)
		}
		if len(nt.Parents) > 0 && nt.Status != contracts.StatusSuspend {
			return fmt.Errorf("create tasks: task %d has parents and must start SUSPEND, not %s", nt.ID, nt.Status)
		}
		ids[nt.ID] = true
	}
	return nil
}

// insertTaskRows inserts the rows that do not collide with an existing
// (task_type, biz_key) and returns the set of IDs it inserted. Rows go in
// sorted by (task_type, biz_key) so that concurrent batches lock the unique
// index in the same order, which makes deadlocks between them rare.
//
// ON DUPLICATE KEY UPDATE fires on the primary key too, where swallowing the
// duplicate would lose the task: there the existing row's id equals the new
// one, and setting it to NULL fails the statement under strict mode, which
// reads as ErrIDTaken. On a (task_type, biz_key) duplicate the existing row
// has another id and is left as it is.
func insertTaskRows(ctx context.Context, tx *sql.Tx, nts []NewTask, at time.Time) (map[int64]bool, error) {
	order := make([]NewTask, len(nts))
	copy(order, nts)
	slices.SortStableFunc(order, func(a, b NewTask) int {
		return cmp.Or(strings.Compare(a.Type, b.Type), compareBizKeys(a.BizKey, b.BizKey))
	})
	named := namedParents(nts)
	rows := make([][]any, len(order))
	for i, nt := range order {
		var bizKey any
		if nt.BizKey != nil {
			bizKey = []byte(*nt.BizKey)
		}
		dag := nt.DAG || len(nt.Parents) > 0
		var children, parents, wf, role any
		if dag && !nt.EdgesLater {
			children, parents = boolRank(named[nt.ID]), len(nt.Parents)
		}
		if dag {
			role = nt.WorkflowRole
		}
		if nt.WorkflowID != 0 {
			wf = nt.WorkflowID
		}
		rows[i] = []any{nt.ID, nt.Type, nt.Priority.Rank(), bizKey, nt.Payload, string(nt.Status),
			nt.NextRunTimeMs, nt.MaxRetries, nt.TimeoutMs, dag, children, parents, at, at, nullString(nt.TraceParent), wf, role}
	}
	err := insertRows(ctx, tx, `INSERT INTO tasks
		(id, task_type, priority, biz_key, payload, status, next_run_time, max_retry_count, timeout_ms,
		 dag, dag_children, dag_parents, created_at, updated_at, trace_parent, workflow_id, workflow_role) VALUES `, ` ON DUPLICATE KEY UPDATE id = IF(id = VALUES(id), NULL, id)`, rows)
	if isNullID(err) {
		return nil, fmt.Errorf("insert tasks: %w", ErrIDTaken)
	}
	if err != nil {
		return nil, fmt.Errorf("insert tasks: %w", err)
	}
	if !slices.ContainsFunc(nts, func(nt NewTask) bool { return nt.BizKey != nil }) {
		// Only (task_type, biz_key) can be deduplicated, and a NULL biz_key
		// never is; a primary key collision failed the insert above. So
		// every row went in, and reading them back would only confirm it.
		found := make(map[int64]bool, len(nts))
		for _, nt := range nts {
			found[nt.ID] = true
		}
		return found, nil
	}
	return insertedIDs(ctx, tx, nts)
}

// namedParents is the set of tasks that items of nts name as a parent:
// created with them, those start with dag_children 1.
func namedParents(nts []NewTask) map[int64]bool {
	var out map[int64]bool
	for _, nt := range nts {
		for _, d := range nt.Parents {
			if out == nil {
				out = map[int64]bool{}
			}
			out[d.ParentID] = true
		}
	}
	return out
}

func isNullID(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1048 && strings.Contains(me.Message, "'id'")
}

func compareBizKeys(a, b *string) int {
	switch {
	case a == nil || b == nil:
		return cmp.Compare(boolRank(a != nil), boolRank(b != nil))
	default:
		return strings.Compare(*a, *b)
	}
}

func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// insertedIDs reads back which of the batch's IDs exist now: since a
// snowflake collision fails the insert, those are the rows it inserted.
func insertedIDs(ctx context.Context, tx *sql.Tx, nts []NewTask) (map[int64]bool, error) {
	ids := make([]any, len(nts))
	for i, nt := range nts {
		ids[i] = nt.ID
	}
	found := make(map[int64]bool, len(nts))
	for chunk := range slices.Chunk(ids, batchChunkRows) {
		rows, err := tx.QueryContext(ctx, `SELECT id FROM tasks WHERE id IN (?`+
			strings.Repeat(",?", len(chunk)-1)+`)`, chunk...)
		if err != nil {
			return nil, fmt.Errorf("find inserted tasks: %w", err)
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("scan inserted task: %w", err)
			}
			found[id] = true
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("find inserted tasks: %w", err)
		}
	}
	return found, nil
}

// batchResults builds the per-item results: created tasks from the input,
// deduplicated ones loaded by (task_type, biz_key) inside the transaction,
// which sees both older rows and rows this batch inserted. The snapshot of
// a REPEATABLE READ transaction is taken at its first plain SELECT, which
// comes after the insert, so it holds every row the insert found in the way.
func batchResults(ctx context.Context, tx *sql.Tx, nts []NewTask, created map[int64]bool, at time.Time) ([]BatchResult, error) {
	var dups []NewTask
	for _, nt := range nts {
		if created[nt.ID] {
			continue
		}
		if nt.BizKey == nil {
			// Without a key only the primary key can refuse a row, and a
			// collision there fails the insert; this guards that rule.
			return nil, fmt.Errorf("task %d: %w", nt.ID, ErrIDTaken)
		}
		dups = append(dups, nt)
	}
	existing, err := tasksByBizKeys(ctx, tx, dups)
	if err != nil {
		return nil, err
	}
	// The columns keep milliseconds; answer what a later read returns.
	stamp := at.Truncate(time.Millisecond)
	out := make([]BatchResult, len(nts))
	for i, nt := range nts {
		if created[nt.ID] {
			out[i].Task = &Task{
				ID: nt.ID, Type: nt.Type, Priority: nt.Priority, BizKey: nt.BizKey, Payload: nt.Payload,
				Status: nt.Status, NextRunTimeMs: nt.NextRunTimeMs, MaxRetries: nt.MaxRetries,
				TimeoutMs: nt.TimeoutMs, CreatedAt: stamp, UpdatedAt: stamp, TraceParent: nt.TraceParent,
			}
			continue
		}
		t, ok := existing[bizKeyOf(nt.Type, *nt.BizKey)]
		if !ok {
			return nil, fmt.Errorf("task %d was neither inserted nor deduplicated on type %q and its biz_key", nt.ID, nt.Type)
		}
		out[i] = BatchResult{Task: t, Deduplicated: true}
	}
	return out, nil
}

// bizKeyOf joins a type and a key into one map key; type names cannot hold
// a NUL byte, so the pair is unambiguous whatever bytes the key holds.
func bizKeyOf(taskType, bizKey string) string { return taskType + "\x00" + bizKey }

// tasksByBizKeys loads the tasks that hold the items' (task_type, biz_key)
// pairs, keyed by bizKeyOf.
func tasksByBizKeys(ctx context.Context, tx *sql.Tx, nts []NewTask) (map[string]*Task, error) {
	out := make(map[string]*Task, len(nts))
	for chunk := range slices.Chunk(nts, batchChunkRows) {
		conds := make([]string, len(chunk))
		args := make([]any, 0, 2*len(chunk))
		for i, nt := range chunk {
			conds[i] = "(task_type = ? AND biz_key = ?)"
			args = append(args, nt.Type, []byte(*nt.BizKey))
		}
		rows, err := tx.QueryContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE `+strings.Join(conds, " OR "), args...)
		if err != nil {
			return nil, fmt.Errorf("load deduplicated tasks: %w", err)
		}
		for rows.Next() {
			t, err := scanTask(rows)
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("scan deduplicated task: %w", err)
			}
			out[bizKeyOf(t.Type, *t.BizKey)] = t
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("load deduplicated tasks: %w", err)
		}
	}
	return out, nil
}

// recordMany writes the history rows of transfers in multi-row inserts,
// each with a fresh event ID (which the relay later uses as Nats-Msg-Id)
// and everything its TaskTransferred event carries: the history relay
// publishes the events from these rows (see RelayHistory), so nothing is
// copied into the outbox. It returns the event IDs in order.
func recordMany(ctx context.Context, tx *sql.Tx, recs []transferRecord) ([]string, error) {
	ids := make([]string, len(recs))
	history := make([][]any, len(recs))
	for i, r := range recs {
		eventID := ulid.Make().String()
		ids[i] = eventID
		prio := r.priority.Rank()
		if prio < 0 {
			prio = contracts.PriorityNormal.Rank()
		}
		history[i] = []any{r.taskID, string(r.from), string(r.to), r.attempt,
			Truncate(r.reason, 2048), Truncate(r.actor, 255), // the columns' widths; actors can carry a caller-given name
			eventID, r.at, r.taskType, prio, r.nextRunTimeMs, r.rejected, routeCode(r.route), nullString(r.traceParent)}
	}
	if d, ok := ctx.Value(historyKey{}).(*deferredHistory); ok {
		d.rows = append(d.rows, history...)
		return ids, nil
	}
	if err := insertHistory(ctx, tx, history); err != nil {
		return nil, err
	}
	return ids, nil
}

func insertHistory(ctx context.Context, tx *sql.Tx, rows [][]any) error {
	if err := insertRows(ctx, tx, `INSERT INTO task_history
		(task_id, from_status, to_status, attempt, reason, actor, event_id, created_at,
		 task_type, priority, next_run_time, rejected, route, trace_parent) VALUES `, "", rows); err != nil {
		return fmt.Errorf("insert history: %w", err)
	}
	return nil
}

// historyKey marks a context whose transaction writes its history rows at
// its end (withDeferredHistory).
type historyKey struct{}

// deferredHistory holds the history rows of a transaction until its end.
type deferredHistory struct{ rows [][]any }

// withDeferredHistory runs body in tx with every history row it records
// held back, then inserts them all in one statement (per chunk), in the
// order they were recorded: a parent's end and the releases it causes
// share an INSERT instead of one each. Nothing inside a transfer reads
// task_history, so holding the rows back changes no decision; their ids
// are allocated nearer the commit, which also narrows the relay's gaps.
func withDeferredHistory(ctx context.Context, tx *sql.Tx, body func(ctx context.Context) error) error {
	d := &deferredHistory{}
	if err := body(context.WithValue(ctx, historyKey{}, d)); err != nil {
		return err
	}
	if len(d.rows) == 0 {
		return nil
	}
	return insertHistory(ctx, tx, d.rows)
}

// insertRows writes head, one "(?, ...)" group per row, then tail, in as
// many statements as the chunk bounds need. Every row must have the same number
// of values.
func insertRows(ctx context.Context, tx *sql.Tx, head, tail string, rows [][]any) error {
	for len(rows) > 0 {
		n, size := 0, 0
		for n < len(rows) && n < batchChunkRows && (n == 0 || size+rowBytes(rows[n]) <= batchChunkBytes) {
			size += rowBytes(rows[n])
			n++
		}
		n = classDown(n) // texts of a few lengths, so that they are prepared once (preparingConnector)
		group := "(?" + strings.Repeat(", ?", len(rows[0])-1) + ")"
		var q strings.Builder
		q.WriteString(head)
		args := make([]any, 0, n*len(rows[0]))
		for i, row := range rows[:n] {
			if i > 0 {
				q.WriteString(", ")
			}
			q.WriteString(group)
			args = append(args, row...)
		}
		q.WriteString(tail)
		if _, err := tx.ExecContext(ctx, q.String(), args...); err != nil {
			return err
		}
		rows = rows[n:]
	}
	return nil
}

// rowBytes estimates a row's share of the statement: its strings and byte
// slices, plus a little for every other value and the punctuation.
func rowBytes(row []any) int {
	n := 0
	for _, v := range row {
		switch v := v.(type) {
		case string:
			n += len(v)
		case []byte:
			n += len(v)
		}
		n += 24
	}
	return n
}

// nullString is s, or NULL when it is empty.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}
