package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/axsched/ax/contracts"
)

// Listing tasks: every list reads one index range in the index's own order
// and stops after Limit rows, so a page costs the same on page one and
// page ten thousand (keyset pagination, never OFFSET):
//
//   - with a state (and no upper creation bound): idx_tasks_status_next_run,
//     latest due time first. For
//     a finished task the due time is when its last attempt was due, so
//     this is "most recently run first"; no index pairs the state with the
//     creation order, since every index holding the state costs every
//     transfer an entry moved.
//   - with a type and no state, or a type and a creation window:
//     idx_tasks_type_id (0015), newest first.
//   - with a type and a business key: uk_tasks_type_biz_key, one row.
//   - otherwise: the primary key, newest first (snowflake IDs are in
//     creation order); with a state and a creation window, the window's
//     range, checking the state on its rows.
//
// Every other filter is checked on the rows the range yields. The creation
// bounds are ID bounds (MinID, MaxID), which the primary key and both
// secondary indexes (which end with the ID) narrow on.

// ListOrder says which index a page was read through, and so what its
// cursor holds.
type ListOrder string

// The two orders of a task list.
const (
	// OrderByID is newest first by ID (creation).
	OrderByID ListOrder = "id"
	// OrderByDue is latest due time first, then by ID, within one state.
	OrderByDue ListOrder = "due"
)

// ListCursor is where the next page starts: after the task it names, in
// the list's order.
type ListCursor struct {
	NextRunTimeMs int64
	ID            int64
}

// TaskFilter selects tasks for ListTasks; zero fields do not filter.
type TaskFilter struct {
	Type   string
	Status contracts.Status
	// BizKey needs Type: keys are unique per type.
	BizKey *string
	// Node is the executor of the current or last attempt; it needs Status.
	Node string
	// MinID and MaxID bound the ID, and so the creation time:
	// MinID <= id < MaxID (0: unbounded).
	MinID, MaxID int64
	// DueFrom, with Status, ends the scan at this due time (unix ms): a
	// task created at or after a time is never due before it, so the
	// submitter derives it from the creation bound, less a clock margin.
	DueFrom int64
}

// ListTasksParams are a filter and a page.
type ListTasksParams struct {
	Filter TaskFilter
	Limit  int
	After  *ListCursor
}

// Order is the order ListTasks returns f's tasks in: by due time when the
// state's index is read, by ID otherwise.
func (f TaskFilter) Order() ListOrder {
	if f.byState() {
		return OrderByDue
	}
	return OrderByID
}

// byState says whether the state's index is read: for a state without a
// business key or an upper creation bound. With MaxID the creation window
// is read by ID instead, since a state's range in due order cannot stop at
// a creation time (a task may fall due long after it was created).
func (f TaskFilter) byState() bool { return f.Status != "" && f.BizKey == nil && f.MaxID == 0 }

// listTaskColumns are taskColumns without the payload and the result,
// which a list leaves in the table: a page of a thousand 64 KiB payloads
// would be 64 MiB.
var listTaskColumns = strings.NewReplacer("payload,", "NULL,", "result,", "NULL,").Replace(taskColumns)

// ListTasks returns a page of the tasks that match p.Filter in its Order.
func (s *Store) ListTasks(ctx context.Context, p ListTasksParams) ([]Task, error) {
	q, args := listTasksSQL(listTaskColumns, p)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	defer rows.Close()
	var out []Task
	for rows.Next() {
		t, err := scanTask(rows)
		if err != nil {
			return nil, fmt.Errorf("list tasks: %w", err)
		}
		out = append(out, *t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	return out, nil
}

// listTasksSQL builds the query for p selecting cols. Indexes are forced
// where the optimizer, on a table of mostly finished tasks, would rather
// read the whole table than a long range.
func listTasksSQL(cols string, p ListTasksParams) (string, []any) {
	f := p.Filter
	var (
		from  string
		where []string
		args  []any
		order string
	)
	add := func(cond string, a ...any) {
		where = append(where, cond)
		args = append(args, a...)
	}
	switch {
	case f.BizKey != nil:
		from, order = "tasks FORCE INDEX (uk_tasks_type_biz_key)", "id DESC"
		add("task_type = ? AND biz_key = ?", f.Type, []byte(*f.BizKey))
	case f.byState():
		from, order = "tasks FORCE INDEX (idx_tasks_status_next_run)", "next_run_time DESC, id DESC"
		add("status = ?", string(f.Status))
		if f.DueFrom > 0 {
			add("next_run_time >= ?", f.DueFrom)
		}
		if p.After != nil {
			add("(next_run_time < ? OR (next_run_time = ? AND id < ?))", p.After.NextRunTimeMs, p.After.NextRunTimeMs, p.After.ID)
		}
	case f.Type != "":
		from, order = "tasks FORCE INDEX (idx_tasks_type_id)", "id DESC"
		add("task_type = ?", f.Type)
	default:
		from, order = "tasks FORCE INDEX (PRIMARY)", "id DESC"
	}
	if f.Status != "" && !f.byState() {
		add("status = ?", string(f.Status))
	}
	if f.Type != "" && f.BizKey == nil && f.byState() {
		add("task_type = ?", f.Type)
	}
	if f.Node != "" {
		add("executor_addr = ?", f.Node)
	}
	if p.After != nil && f.Order() == OrderByID {
		add("id < ?", p.After.ID)
	}
	if f.MinID > 0 {
		add("id >= ?", f.MinID)
	}
	if f.MaxID > 0 {
		add("id < ?", f.MaxID)
	}
	return listSQL(cols, from, where, args, order, p.Limit)
}

// listSQL assembles a list's query: cols from from, where's conditions
// (args their values) joined by AND, in order, cut at limit when positive.
func listSQL(cols, from string, where []string, args []any, order string, limit int) (string, []any) {
	q := "SELECT " + cols + " FROM " + from
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY " + order
	if limit > 0 {
		q += " LIMIT ?"
		args = append(args, limit)
	}
	return q, args
}

// ExplainListTasks returns MySQL's EXPLAIN of the query ListTasks runs for
// p, one row per table access as column name → value, so a test can
// check that every filter reads an index range and never the whole table.
func (s *Store) ExplainListTasks(ctx context.Context, p ListTasksParams) ([]map[string]string, error) {
	q, args := listTasksSQL(listTaskColumns, p)
	return s.explain(ctx, q, args)
}

// explain returns MySQL's EXPLAIN of q, one row per table access as column
// name → value.
func (s *Store) explain(ctx context.Context, q string, args []any) ([]map[string]string, error) {
	rows, err := s.db.QueryContext(ctx, "EXPLAIN "+q, args...)
	if err != nil {
		return nil, fmt.Errorf("explain list tasks: %w", err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, fmt.Errorf("explain list tasks: %w", err)
	}
	var out []map[string]string
	for rows.Next() {
		vals := make([]*string, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, fmt.Errorf("explain list tasks: %w", err)
		}
		row := make(map[string]string, len(cols))
		for i, c := range cols {
			if vals[i] != nil {
				row[c] = *vals[i]
			}
		}
		out = append(out, row)
	}
	return out, rows.Err()
}
