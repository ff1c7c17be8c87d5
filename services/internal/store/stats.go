package store

import (
	"context"
	"database/sql"
	"fmt"
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

// CountByTypeState counts every task per type and state. It reads the whole
// table: no index holds both columns (one would cost every transfer), so
// callers cache the answer (the submitter for a few seconds).
func (s *Store) CountByTypeState(ctx context.Context) ([]TypeStateCount, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT task_type, status, COUNT(*) FROM tasks GROUP BY task_type, status ORDER BY task_type, status`)
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
