package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/axsched/ax/contracts"
)

// TypeStateCount is how many tasks of one type are in one state.
type TypeStateCount struct {
	Type   string
	Status contracts.Status
	Count  int64
}

// LaneBacklog is one lane's due waiting tasks.
type LaneBacklog struct {
	Priority  contracts.Priority
	Count     int64
	OldestDue int64 // unix ms; 0 when Count is 0
}

// LiveStates are the states of work not finished: the queue depth an
// operator watches.
var LiveStates = []contracts.Status{contracts.StatusReady, contracts.StatusRunning, contracts.StatusRetrying, contracts.StatusSuspend}

// CountLiveByTypeState counts the tasks in LiveStates per type and state,
// reading only their ranges of the state index (and each row for its
// type): cheap while the work in progress is small beside the finished
// tasks, as it is.
func (s *Store) CountLiveByTypeState(ctx context.Context) ([]TypeStateCount, error) {
	return s.countByTypeState(ctx, `SELECT task_type, status, COUNT(*) FROM tasks FORCE INDEX (idx_tasks_status_next_run)
		WHERE status IN `+statusList(LiveStates)+` GROUP BY task_type, status`)
}

// CountFinishedByTypeState counts the tasks in FinalStates per type and
// state. It reads the whole table (seconds for a million tasks): no index
// holds both columns, and one would cost every transfer an entry moved, so
// callers read it seldom (the submitter once a minute).
func (s *Store) CountFinishedByTypeState(ctx context.Context) ([]TypeStateCount, error) {
	return s.countByTypeState(ctx, `SELECT task_type, status, COUNT(*) FROM tasks
		WHERE status IN `+statusList(FinalStates)+` GROUP BY task_type, status`)
}

// CountWorkflowsByState counts workflows per state, the moving ones
// (RUNNING, COMPENSATING) when moving is set and the ended ones otherwise,
// through the state index (migration 0020): the moving ones are a short
// range, the ended ones the rest of the index, which callers read seldom
// (the submitter with the finished tasks, once a minute).
func (s *Store) CountWorkflowsByState(ctx context.Context, moving bool) (map[contracts.WorkflowStatus]int64, error) {
	in := "IN"
	if !moving {
		in = "NOT IN"
	}
	rows, err := s.db.QueryContext(ctx, `SELECT status, COUNT(*) FROM workflows FORCE INDEX (idx_workflows_status_id)
		WHERE status `+in+` ('`+string(contracts.WorkflowRunning)+`', '`+string(contracts.WorkflowCompensating)+`') GROUP BY status`)
	if err != nil {
		return nil, fmt.Errorf("count workflows by state: %w", err)
	}
	defer rows.Close()
	out := map[contracts.WorkflowStatus]int64{}
	for rows.Next() {
		var (
			status string
			n      int64
		)
		if err := rows.Scan(&status, &n); err != nil {
			return nil, fmt.Errorf("count workflows by state: %w", err)
		}
		out[contracts.WorkflowStatus(status)] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count workflows by state: %w", err)
	}
	return out, nil
}

// statusList is states as an SQL list of literals; they are constants.
func statusList(states []contracts.Status) string {
	q := make([]string, len(states))
	for i, st := range states {
		q[i] = "'" + string(st) + "'"
	}
	return "(" + strings.Join(q, ", ") + ")"
}

func (s *Store) countByTypeState(ctx context.Context, query string) ([]TypeStateCount, error) {
	rows, err := s.db.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("count tasks by type and state: %w", err)
	}
	defer rows.Close()
	var out []TypeStateCount
	for rows.Next() {
		var c TypeStateCount
		var status string
		if err := rows.Scan(&c.Type, &status, &c.Count); err != nil {
			return nil, fmt.Errorf("count tasks by type and state: %w", err)
		}
		c.Status = contracts.Status(status)
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count tasks by type and state: %w", err)
	}
	return out, nil
}

// LaneBacklogs counts, per lane, the waiting tasks (READY, RETRYING) due at
// or before now, with the oldest due time: the ranges of the state index
// up to now, so it reads only the backlog itself.
func (s *Store) LaneBacklogs(ctx context.Context, now time.Time) ([]LaneBacklog, error) {
	out := make([]LaneBacklog, len(contracts.Priorities))
	for i, p := range contracts.Priorities {
		out[i].Priority = p
	}
	rows, err := s.db.QueryContext(ctx, `SELECT priority, COUNT(*), MIN(next_run_time) FROM tasks FORCE INDEX (idx_tasks_status_next_run)
		WHERE status IN ('READY', 'RETRYING') AND next_run_time <= ? GROUP BY priority`, now.UnixMilli())
	if err != nil {
		return nil, fmt.Errorf("count lane backlogs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var rank int
		var count int64
		var oldest sql.NullInt64
		if err := rows.Scan(&rank, &count, &oldest); err != nil {
			return nil, fmt.Errorf("count lane backlogs: %w", err)
		}
		if rank >= 0 && rank < len(out) {
			out[rank].Count, out[rank].OldestDue = count, oldest.Int64
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count lane backlogs: %w", err)
	}
	return out, nil
}
