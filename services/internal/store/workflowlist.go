package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/axsched/ax/contracts"
)

// Listing workflows: newest first by ID (snowflakes, so creation order),
// one index range read in its order and cut at the limit, whatever page:
//
//   - with a business key: idx_workflows_biz_key, or with a name too the
//     unique key (name, biz_key): a handful of rows;
//   - with a state: idx_workflows_status_id (migration 0020);
//   - otherwise: the primary key.
//
// The name and the creation bounds are checked on the range's rows (the
// bounds narrow every range, each index ending with the ID).

// WorkflowFilter selects workflows for ListWorkflows; zero fields do not
// filter.
type WorkflowFilter struct {
	Status contracts.WorkflowStatus
	Name   string
	BizKey *string
	// MinID and MaxID bound the ID, and so the creation time:
	// MinID <= id < MaxID (0: unbounded).
	MinID, MaxID int64
}

// ListWorkflowsParams are a filter and a page: up to Limit workflows with
// IDs below AfterID (0: from the newest).
type ListWorkflowsParams struct {
	Filter  WorkflowFilter
	Limit   int
	AfterID int64
}

// WorkflowListItem is a workflow as a list reads it: no steps.
type WorkflowListItem struct {
	ID        int64
	Name      string
	BizKey    *string
	Status    contracts.WorkflowStatus
	Reason    string
	OpenSteps int
	CreatedAt time.Time
	UpdatedAt time.Time
}

// API returns the item as GET /v1/workflows shows it.
func (w *WorkflowListItem) API() contracts.WorkflowListItem {
	out := contracts.WorkflowListItem{ID: strconv.FormatInt(w.ID, 10), Name: w.Name, Status: w.Status,
		Reason: w.Reason, OpenSteps: w.OpenSteps, CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt}
	if w.BizKey != nil {
		out.BizKey = *w.BizKey
	}
	return out
}

const workflowListColumns = `id, name, biz_key, status, reason, open_steps, created_at, updated_at, steps IS NOT NULL`

// ListWorkflows returns a page of the workflows that match p.Filter,
// newest first.
func (s *Store) ListWorkflows(ctx context.Context, p ListWorkflowsParams) ([]WorkflowListItem, error) {
	q, args := listWorkflowsSQL(p)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	defer rows.Close()
	var out []WorkflowListItem
	var listed []bool
	for rows.Next() {
		var (
			w      WorkflowListItem
			bizKey []byte
			status string
			onRow  bool
		)
		if err := rows.Scan(&w.ID, &w.Name, &bizKey, &status, &w.Reason, &w.OpenSteps, &w.CreatedAt, &w.UpdatedAt, &onRow); err != nil {
			return nil, fmt.Errorf("list workflows: %w", err)
		}
		w.Status = contracts.WorkflowStatus(status)
		if bizKey != nil {
			k := string(bizKey)
			w.BizKey = &k
		}
		out = append(out, w)
		listed = append(listed, onRow)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	// A workflow that lists its steps on its row may count only its
	// leaves (workflowsteps.go): while it has some open, its open steps
	// are counted from their tasks. With none open, none is.
	var recount []int64
	for i, w := range out {
		if listed[i] && w.OpenSteps > 0 {
			recount = append(recount, w.ID)
		}
	}
	if len(recount) == 0 {
		return out, nil
	}
	n, err := s.openStepCounts(ctx, recount)
	if err != nil {
		return nil, fmt.Errorf("list workflows: %w", err)
	}
	for i := range out {
		if c, ok := n[out[i].ID]; ok {
			out[i].OpenSteps = c
		}
	}
	return out, nil
}

// listWorkflowsSQL builds ListWorkflows' query. Indexes are forced: on a
// table of mostly finished workflows the optimizer would rather read the
// whole table than a long range of the state's index.
func listWorkflowsSQL(p ListWorkflowsParams) (string, []any) {
	f := p.Filter
	var (
		from  string
		where []string
		args  []any
	)
	add := func(cond string, a ...any) {
		where = append(where, cond)
		args = append(args, a...)
	}
	switch {
	case f.BizKey != nil && f.Name != "":
		from = "workflows FORCE INDEX (uk_workflows_name_biz_key)"
		add("name = ? AND biz_key = ?", f.Name, []byte(*f.BizKey))
	case f.BizKey != nil:
		from = "workflows FORCE INDEX (idx_workflows_biz_key)"
		add("biz_key = ?", []byte(*f.BizKey))
	case f.Status != "":
		from = "workflows FORCE INDEX (idx_workflows_status_id)"
	default:
		from = "workflows FORCE INDEX (PRIMARY)"
	}
	if f.Status != "" {
		add("status = ?", string(f.Status))
	}
	if f.Name != "" && f.BizKey == nil {
		add("name = ?", f.Name)
	}
	if p.AfterID > 0 {
		add("id < ?", p.AfterID)
	}
	if f.MinID > 0 {
		add("id >= ?", f.MinID)
	}
	if f.MaxID > 0 {
		add("id < ?", f.MaxID)
	}
	return listSQL(workflowListColumns, from, where, args, "id DESC", p.Limit)
}

// ExplainListWorkflows returns MySQL's EXPLAIN of the query ListWorkflows
// runs for p, so a test can check that every filter reads an index range.
func (s *Store) ExplainListWorkflows(ctx context.Context, p ListWorkflowsParams) ([]map[string]string, error) {
	q, args := listWorkflowsSQL(p)
	return s.explain(ctx, q, args)
}
