package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/axsched/ax/contracts"
)

// RunRow is what a deferred claim reads of a task before its handler
// starts: the state and due time the claim's fence checks, and what the
// attempt runs with.
type RunRow struct {
	Status        contracts.Status
	Attempt       int
	NextRunTimeMs int64
	Run           RunFields
}

// Claimable reports whether a claim of the dispatched attempt, due no
// later than dueByMs (0: any time), would hold on this row: the fence of a
// claim's transfer (TransferParams.Attempt and DueByMs), checked without
// writing.
func (r RunRow) Claimable(attempt int, dueByMs int64) bool {
	return r.Status == contracts.StatusReady && r.Attempt == attempt && (dueByMs <= 0 || r.NextRunTimeMs <= dueByMs)
}

// RunRows reads the rows of ids with a plain (non-locking) SELECT, for
// claims whose READY -> RUNNING transfer is written later, with the
// attempt's outcome when the handler ends quickly (the executor's fused
// claims). Nothing is fenced here: the transfer that follows checks the
// same fence again under its row lock. Missing ids are absent from the map.
func (s *Store) RunRows(ctx context.Context, ids []int64) (map[int64]RunRow, error) {
	uniq := slices.Clone(ids)
	slices.Sort(uniq)
	uniq = slices.Compact(uniq)
	out := make(map[int64]RunRow, len(uniq))
	for chunk := range slices.Chunk(uniq, batchChunkRows) {
		in, args := inIDs(chunk)
		rows, err := s.db.QueryContext(ctx, `SELECT id, status, attempt, next_run_time, payload, timeout_ms, retry_count,
			max_retry_count, trace_parent FROM tasks FORCE INDEX (PRIMARY) WHERE id IN (`+in+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("read %d tasks to run: %w", len(chunk), err)
		}
		for rows.Next() {
			var (
				id     int64
				r      RunRow
				status string
				tp     *string
			)
			if err := rows.Scan(&id, &status, &r.Attempt, &r.NextRunTimeMs, &r.Run.Payload, &r.Run.TimeoutMs,
				&r.Run.RetryCount, &r.Run.MaxRetries, &tp); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read tasks to run: %w", err)
			}
			r.Status = contracts.Status(status)
			if tp != nil {
				r.Run.TraceParent = *tp
			}
			out[id] = r
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("read tasks to run: %w", err)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read tasks to run: %w", err)
		}
	}
	return out, nil
}
