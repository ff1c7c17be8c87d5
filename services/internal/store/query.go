package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/axsched/ax/contracts"
)

// DueRef is what the timer needs to index a waiting task: when it is due
// and on which lane, and what the dispatcher needs to hand it on without
// reading the row (its type, attempt and state, READY or RETRYING). Type
// is empty where the source did not say (events written before migration
// 0007): such a task is read back when it falls due.
type DueRef struct {
	ID            int64
	Priority      contracts.Priority
	NextRunTimeMs int64
	Type          string
	Attempt       int
	Status        contracts.Status
	// TraceParent is the task's trace context (tracing), empty for none.
	TraceParent string
}

// dueRefColumns are what dueRefs scans, in its order.
const dueRefColumns = "id, priority, next_run_time, task_type, attempt, status, trace_parent"

// waitingStates are the states in which a task waits for its due time, in
// the order idx_tasks_status_next_run holds them.
var waitingStates = []contracts.Status{contracts.StatusReady, contracts.StatusRetrying}

// ReadyPage returns waiting tasks (READY, then RETRYING) that come after
// the given one (nil: from the first) by state, due time and ID, for
// rebuilding the timer's index from the truth. The order is the status
// index's own, so every page continues its scan where the last one
// stopped. A task that changes state or due time meanwhile may be missed
// or seen twice; its event indexes it anyway.
func (s *Store) ReadyPage(ctx context.Context, after *DueRef, limit int) ([]DueRef, error) {
	return s.waitingPage(ctx, "", after, limit)
}

// ReadyOfType is ReadyPage for one task type, for re-indexing a resumed
// type at once. It reads past the waiting tasks of other types: no index
// leads with the type, as one would cost every state change.
func (s *Store) ReadyOfType(ctx context.Context, taskType string, after *DueRef, limit int) ([]DueRef, error) {
	return s.waitingPage(ctx, taskType, after, limit)
}

func (s *Store) waitingPage(ctx context.Context, taskType string, after *DueRef, limit int) ([]DueRef, error) {
	return pageWaiting(after, limit, func(state contracts.Status, from *DueRef, n int) ([]DueRef, error) {
		q := `SELECT ` + dueRefColumns + ` FROM tasks FORCE INDEX (idx_tasks_status_next_run) WHERE status = ?`
		args := []any{string(state)}
		if from != nil {
			q += ` AND (next_run_time > ? OR (next_run_time = ? AND id > ?))`
			args = append(args, from.NextRunTimeMs, from.NextRunTimeMs, from.ID)
		}
		if taskType != "" {
			q += ` AND task_type = ?`
			args = append(args, taskType)
		}
		return s.dueRefs(ctx, q+` ORDER BY next_run_time, id LIMIT ?`, append(args, n)...)
	})
}

// pageWaiting reads a page of waiting tasks a state at a time, READY then
// RETRYING, each in the status index's order, from after on (nil: from
// the first): page reads up to n tasks of one state after from (nil: from
// its first), until limit are read.
func pageWaiting(after *DueRef, limit int, page func(state contracts.Status, from *DueRef, n int) ([]DueRef, error)) ([]DueRef, error) {
	first := 0
	if after != nil {
		if first = slices.Index(waitingStates, after.Status); first < 0 {
			return nil, fmt.Errorf("page waiting tasks after task %d: it is %s, not waiting", after.ID, after.Status)
		}
	}
	var out []DueRef
	for _, state := range waitingStates[first:] {
		var from *DueRef
		if after != nil && after.Status == state {
			from = after
		}
		got, err := page(state, from, limit-len(out))
		if err != nil {
			return nil, err
		}
		if out = append(out, got...); len(out) >= limit {
			break
		}
	}
	return out, nil
}

// staleReadySQL reads a page of the stale tasks of one state (StaleReady).
const staleReadySQL = `SELECT ` + dueRefColumns + ` FROM tasks FORCE INDEX (idx_tasks_status_next_run)
	WHERE status = ? AND next_run_time <= ?
	  AND (next_run_time > ? OR (next_run_time = ? AND id > ?))
	  AND updated_at < NOW(3) - INTERVAL ? MICROSECOND
	  AND task_type NOT IN (SELECT name FROM task_types WHERE paused)
	ORDER BY next_run_time, id LIMIT ?`

// StaleReady returns READY (and RETRYING) tasks due before horizonMs that
// have not changed for longer than grace: the candidates whose READY event
// or due command may have been lost. The caller leaves out those dispatched
// recently, and pages on with the last ref it got (after; nil for the first
// page). Tasks of paused types are left alone: they wait on purpose. Age is
// judged on the database clock, in SQL.
//
// Each state is read on its own in the status index's order, so a page
// reads about as many rows as it returns: one query over both states
// sorted every task due before the horizon for each page (a backlog of
// 50,000 due tasks cost 130 ms a page).
func (s *Store) StaleReady(ctx context.Context, horizonMs int64, grace time.Duration, after *DueRef, limit int) ([]DueRef, error) {
	return pageWaiting(after, limit, func(state contracts.Status, from *DueRef, n int) ([]DueRef, error) {
		afterNext, afterID := int64(-1<<62), int64(0)
		if from != nil {
			afterNext, afterID = from.NextRunTimeMs, from.ID
		}
		return s.dueRefs(ctx, staleReadySQL, string(state), horizonMs, afterNext, afterNext, afterID, grace.Microseconds(), n)
	})
}

func (s *Store) dueRefs(ctx context.Context, q string, args ...any) ([]DueRef, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("query ready tasks: %w", err)
	}
	defer rows.Close()
	var out []DueRef
	for rows.Next() {
		var (
			d      DueRef
			prio   int
			status string
			tp     sql.NullString
		)
		if err := rows.Scan(&d.ID, &prio, &d.NextRunTimeMs, &d.Type, &d.Attempt, &status, &tp); err != nil {
			return nil, fmt.Errorf("scan ready task: %w", err)
		}
		d.Priority, d.Status, d.TraceParent = contracts.PriorityFromRank(prio), contracts.Status(status), tp.String
		out = append(out, d)
	}
	return out, rows.Err()
}

// attemptsWhere selects the rows of refs that are in status and still at
// the given attempt. The ID list goes first and the statements force the
// primary key: a plan through the status index would lock every row of
// that status (thousands of READY tasks under load) and stall the claims.
func attemptsWhere(refs []AttemptRef, status string) string {
	return `id IN (?` + strings.Repeat(", ?", len(refs)-1) + `) AND status = '` + status +
		`' AND (id, attempt) IN ((?, ?)` + strings.Repeat(", (?, ?)", len(refs)-1) + `)`
}

func attemptsArgs(refs []AttemptRef) []any {
	args := make([]any, 0, 3*len(refs))
	for _, r := range refs {
		args = append(args, r.ID)
	}
	for _, r := range refs {
		args = append(args, r.ID, r.Attempt)
	}
	return args
}

// RunningRef identifies one attempt of a RUNNING task that stopped
// heartbeating.
type RunningRef struct {
	ID            int64
	Type          string
	Attempt       int
	RetryCount    int
	MaxRetries    int
	Executor      string
	LastHeartbeat time.Time
	// PastDeadline: the attempt started longer ago than its timeout plus
	// the grace given to SilentRunning (database clock).
	PastDeadline bool
}

// SilentRunning returns RUNNING tasks whose last heartbeat is older than
// silence on the database clock (or missing), and whether each has run past
// its timeout plus grace.
func (s *Store) SilentRunning(ctx context.Context, silence, grace time.Duration, limit int) ([]RunningRef, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, task_type, attempt, retry_count, max_retry_count,
			COALESCE(executor_addr, ''), COALESCE(last_heartbeat_time, updated_at),
			COALESCE(started_at, updated_at) < NOW(3) - INTERVAL (timeout_ms * 1000 + ?) MICROSECOND
		FROM tasks
		WHERE status = 'RUNNING'
		  AND (last_heartbeat_time IS NULL OR last_heartbeat_time < NOW(3) - INTERVAL ? MICROSECOND)
		ORDER BY last_heartbeat_time LIMIT ?`, grace.Microseconds(), silence.Microseconds(), limit)
	if err != nil {
		return nil, fmt.Errorf("query silent running tasks: %w", err)
	}
	return scanRunning(rows)
}

// AttemptRef names one attempt of a task.
type AttemptRef struct {
	ID      int64
	Attempt int
}

// Heartbeat refreshes last_heartbeat_time of the given attempts in one
// statement and returns the IDs whose attempt is no longer current (the task
// was cancelled, finished or taken over), which the caller should stop.
func (s *Store) Heartbeat(ctx context.Context, refs []AttemptRef) (map[int64]bool, error) {
	if len(refs) == 0 {
		return nil, nil
	}
	res, err := s.db.ExecContext(ctx, `UPDATE tasks FORCE INDEX (PRIMARY) SET last_heartbeat_time = NOW(3)
		WHERE `+attemptsWhere(refs, "RUNNING"), attemptsArgs(refs)...)
	if err != nil {
		return nil, fmt.Errorf("heartbeat %d tasks: %w", len(refs), err)
	}
	if n, err := res.RowsAffected(); err == nil && int(n) == len(refs) {
		return nil, nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM tasks FORCE INDEX (PRIMARY) WHERE `+attemptsWhere(refs, "RUNNING"), attemptsArgs(refs)...)
	if err != nil {
		return nil, fmt.Errorf("heartbeat check: %w", err)
	}
	defer rows.Close()
	stale := make(map[int64]bool, len(refs))
	for _, r := range refs {
		stale[r.ID] = true
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("heartbeat check: %w", err)
		}
		delete(stale, id)
	}
	return stale, rows.Err()
}

// RunningOn returns the RUNNING tasks whose executor is one of executors
// and whose heartbeat in MySQL is older than silence (database clock): an
// executor that still refreshes a task's heartbeat is running it, whatever
// Redis says about the executor.
func (s *Store) RunningOn(ctx context.Context, executors []string, silence time.Duration, limit int) ([]RunningRef, error) {
	if len(executors) == 0 {
		return nil, nil
	}
	args := make([]any, 0, len(executors)+2)
	for _, e := range executors {
		args = append(args, e)
	}
	args = append(args, silence.Microseconds(), limit)
	rows, err := s.db.QueryContext(ctx, `SELECT id, task_type, attempt, retry_count, max_retry_count,
			COALESCE(executor_addr, ''), COALESCE(last_heartbeat_time, updated_at), FALSE
		FROM tasks WHERE status = 'RUNNING' AND executor_addr IN (?`+strings.Repeat(", ?", len(executors)-1)+`)
		  AND COALESCE(last_heartbeat_time, updated_at) < NOW(3) - INTERVAL ? MICROSECOND
		ORDER BY id LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("query running tasks of %d executors: %w", len(executors), err)
	}
	return scanRunning(rows)
}

// RunningNotOn returns RUNNING tasks with id > afterID whose executor is
// none of executors (or is empty), in id order: the candidates for the
// reaper's orphan sweep, which pages through them all so that no task can
// hide behind a batch limit.
func (s *Store) RunningNotOn(ctx context.Context, executors []string, afterID int64, limit int) ([]RunningRef, error) {
	args := make([]any, 0, len(executors)+2)
	args = append(args, afterID)
	notOn := ""
	if len(executors) > 0 {
		notOn = ` AND COALESCE(executor_addr, '') NOT IN (?` + strings.Repeat(", ?", len(executors)-1) + `)`
		for _, e := range executors {
			args = append(args, e)
		}
	}
	args = append(args, limit)
	rows, err := s.db.QueryContext(ctx, `SELECT id, task_type, attempt, retry_count, max_retry_count,
			COALESCE(executor_addr, ''), COALESCE(last_heartbeat_time, updated_at), FALSE
		FROM tasks WHERE status = 'RUNNING' AND id > ?`+notOn+`
		ORDER BY id LIMIT ?`, args...)
	if err != nil {
		return nil, fmt.Errorf("query running tasks not on %d executors: %w", len(executors), err)
	}
	return scanRunning(rows)
}

// RunningOfType returns up to limit RUNNING tasks of taskType: what a
// type's cluster-wide running set in Redis is rebuilt from when Redis lost
// it.
func (s *Store) RunningOfType(ctx context.Context, taskType string, limit int) ([]RunningRef, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, task_type, attempt, retry_count, max_retry_count,
			COALESCE(executor_addr, ''), COALESCE(last_heartbeat_time, updated_at), FALSE
		FROM tasks WHERE status = 'RUNNING' AND task_type = ? ORDER BY id LIMIT ?`, taskType, limit)
	if err != nil {
		return nil, fmt.Errorf("query running tasks of %s: %w", taskType, err)
	}
	return scanRunning(rows)
}

// scanRunning reads the rows of SilentRunning, RunningOn, RunningNotOn and
// RunningOfType.
func scanRunning(rows *sql.Rows) ([]RunningRef, error) {
	defer rows.Close()
	var out []RunningRef
	for rows.Next() {
		var r RunningRef
		if err := rows.Scan(&r.ID, &r.Type, &r.Attempt, &r.RetryCount, &r.MaxRetries, &r.Executor,
			&r.LastHeartbeat, &r.PastDeadline); err != nil {
			return nil, fmt.Errorf("scan running task: %w", err)
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
