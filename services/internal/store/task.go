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

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
)

// Task is a row of the tasks table.
type Task struct {
	ID            int64
	Type          string
	Priority      contracts.Priority
	BizKey        *string
	Payload       []byte
	Status        contracts.Status
	NextRunTimeMs int64
	Attempt       int
	RetryCount    int
	MaxRetries    int
	TimeoutMs     int64
	ExecutorAddr  string
	// ExecVersion is the version of the executor that last claimed it.
	ExecVersion   string
	LastHeartbeat *time.Time
	LastError     string
	// Result is what the handler returned (JSON), nil when none.
	Result []byte
	// Progress is the last progress the running attempt reported, nil
	// when none.
	Progress  *Progress
	CreatedAt time.Time
	UpdatedAt time.Time
	// TraceParent is the task's stored trace context (tracing).
	TraceParent string
	// WorkflowID is the workflow of a step or a compensation (migration
	// 0019); 0 for any other task.
	WorkflowID int64
}

// Progress is how far a long run has got, as its handler said.
type Progress struct {
	Percent int
	Message string
	At      time.Time
}

// API converts the row to its public JSON shape.
func (t *Task) API() contracts.Task {
	out := contracts.Task{
		ID:          strconv.FormatInt(t.ID, 10),
		Type:        t.Type,
		Status:      t.Status,
		Priority:    t.Priority,
		Payload:     t.Payload,
		Attempt:     t.Attempt,
		RetryCount:  t.RetryCount,
		MaxRetries:  t.MaxRetries,
		Timeout:     (time.Duration(t.TimeoutMs) * time.Millisecond).String(),
		NextRunTime: time.UnixMilli(t.NextRunTimeMs).UTC(),
		Executor:    t.ExecutorAddr,
		Version:     t.ExecVersion,
		LastError:   t.LastError,
		CreatedAt:   t.CreatedAt,
		UpdatedAt:   t.UpdatedAt,
	}
	if t.BizKey != nil {
		out.BizKey = *t.BizKey
	}
	if t.Result != nil {
		out.Result = t.Result
	}
	if p := t.Progress; p != nil {
		out.Progress = &contracts.TaskProgress{Percent: p.Percent, Message: p.Message, At: p.At}
	}
	if len(t.TraceParent) == 55 {
		out.TraceID = t.TraceParent[3:35] // version-traceid-spanid-flags
	}
	if t.WorkflowID != 0 {
		out.WorkflowID = strconv.FormatInt(t.WorkflowID, 10)
	}
	return out
}

const taskColumns = `id, task_type, priority, biz_key, payload, status, next_run_time, attempt,
	retry_count, max_retry_count, timeout_ms, executor_addr, last_heartbeat_time, last_error,
	result, progress_pct, progress_message, progress_at, created_at, updated_at, exec_version, trace_parent,
	workflow_id`

type rowScanner interface{ Scan(dest ...any) error }

func scanTask(r rowScanner) (*Task, error) {
	var (
		t         Task
		prio      int
		bizKey    []byte
		status    string
		executor  sql.NullString
		heartbeat sql.NullTime
		lastError sql.NullString
		pct       sql.NullInt64
		msg       sql.NullString
		pctAt     sql.NullTime
		version   sql.NullString
		tp        sql.NullString
		workflow  sql.NullInt64
	)
	err := r.Scan(&t.ID, &t.Type, &prio, &bizKey, &t.Payload, &status, &t.NextRunTimeMs, &t.Attempt,
		&t.RetryCount, &t.MaxRetries, &t.TimeoutMs, &executor, &heartbeat, &lastError,
		&t.Result, &pct, &msg, &pctAt, &t.CreatedAt, &t.UpdatedAt, &version, &tp, &workflow)
	if err != nil {
		return nil, err
	}
	t.Priority = contracts.PriorityFromRank(prio)
	t.Status = contracts.Status(status)
	if bizKey != nil {
		k := string(bizKey)
		t.BizKey = &k
	}
	t.ExecutorAddr, t.ExecVersion = executor.String, version.String
	t.TraceParent = tp.String
	t.WorkflowID = workflow.Int64
	t.LastError = lastError.String
	if heartbeat.Valid {
		hb := heartbeat.Time
		t.LastHeartbeat = &hb
	}
	if pct.Valid {
		t.Progress = &Progress{Percent: int(pct.Int64), Message: msg.String, At: pctAt.Time}
	}
	return &t, nil
}

// GetTask loads one task.
func (s *Store) GetTask(ctx context.Context, id int64) (*Task, error) {
	row := s.db.QueryRowContext(ctx, `SELECT `+taskColumns+` FROM tasks WHERE id = ?`, id)
	t, err := scanTask(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("task %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get task %d: %w", id, err)
	}
	return t, nil
}

// DueTask is what the dispatcher checks before handing a due task on: its
// state and where it goes, not what it runs with (the executor's claim
// reads that from the row it locks).
type DueTask struct {
	ID            int64
	Type          string
	Priority      contracts.Priority
	Status        contracts.Status
	Attempt       int
	NextRunTimeMs int64
	TimeoutMs     int64
	RetryCount    int
	MaxRetries    int
	// BizKey and ExecVersion route a type in rollout: the key picks a new
	// task's version, and a task that ran keeps its own.
	BizKey      string
	ExecVersion string
}

// DueTasks reads the DueTask of each of ids that exists, in one query per
// chunk; the payload stays in the table.
func (s *Store) DueTasks(ctx context.Context, ids []int64) (map[int64]*DueTask, error) {
	out := make(map[int64]*DueTask, len(ids))
	for chunk := range slices.Chunk(ids, batchChunkRows) {
		args := make([]any, len(chunk))
		for i, id := range chunk {
			args[i] = id
		}
		rows, err := s.db.QueryContext(ctx, `SELECT id, task_type, priority, status, attempt, next_run_time,
			timeout_ms, retry_count, max_retry_count, COALESCE(biz_key, ''), COALESCE(exec_version, '')
			FROM tasks WHERE id IN (?`+strings.Repeat(", ?", len(chunk)-1)+`)`, args...)
		if err != nil {
			return nil, fmt.Errorf("read %d due task(s): %w", len(chunk), err)
		}
		for rows.Next() {
			var (
				t      DueTask
				prio   int
				status string
			)
			if err := rows.Scan(&t.ID, &t.Type, &prio, &status, &t.Attempt, &t.NextRunTimeMs,
				&t.TimeoutMs, &t.RetryCount, &t.MaxRetries, &t.BizKey, &t.ExecVersion); err != nil {
				rows.Close()
				return nil, fmt.Errorf("read due tasks: %w", err)
			}
			t.Priority, t.Status = contracts.PriorityFromRank(prio), contracts.Status(status)
			out[t.ID] = &t
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("read due tasks: %w", err)
		}
		if err := rows.Err(); err != nil {
			return nil, fmt.Errorf("read due tasks: %w", err)
		}
	}
	return out, nil
}

// NewTask describes a task to create.
type NewTask struct {
	ID            int64
	Type          string
	Priority      contracts.Priority
	BizKey        *string
	Payload       []byte
	Status        contracts.Status // READY or SUSPEND
	NextRunTimeMs int64
	MaxRetries    int
	TimeoutMs     int64
	Reason        string
	Actor         string
	// Route, for a READY task, says who takes it on from its event
	// (events.Route): the timer by default, the dispatcher when it is due
	// at once.
	Route events.Route
	// Parents are the tasks this one waits for (it must then be created
	// SUSPEND); they may be existing tasks or earlier items of the same
	// CreateTasks call. A parent that is final already counts at once.
	Parents []Dependency
	// DAG marks a task that takes part in a DAG without parents of its own
	// (a workflow's first steps, compensations): its final transfer then
	// looks for children and its workflow.
	DAG bool
	// EdgesLater marks a DAG task that may gain parents and children after
	// its creation (a compensation, chained when compensation starts): its
	// shape (dag_children, dag_parents) is left unknown, so its transfers
	// look its edges up.
	EdgesLater bool
	// TraceParent is the W3C trace context every span of the task joins
	// (tracing); empty for none.
	TraceParent string
	// WorkflowID and WorkflowRole place a DAG task in its workflow
	// (migration 0019): roleStep or roleCompensation of workflow
	// WorkflowID, or 0 for a DAG task in none. Set by CreateWorkflows.
	WorkflowID   int64
	WorkflowRole int
}

// The parts a task plays in a workflow (tasks.workflow_role, bits).
const (
	roleStep         = 1
	roleCompensation = 2
	// roleUncompensated marks a step of a workflow without compensations
	// (added to roleStep at creation): its success changes nothing but
	// its workflow's count of open steps, which one UPDATE counts down
	// without reading the workflow first (countDownSteps). The column's
	// comment in migration 0019 predates it; older builds ignore the bit.
	roleUncompensated = 4
	// roleEndedBefore marks a step re-run from a dead letter after it
	// ended: its later ends are looked up as before (workflow_steps
	// knows it ended).
	roleEndedBefore = 8
	// roleListed marks a step listed on its workflow's row (migration
	// 0021), with no row in workflow_steps: its end records nothing there.
	roleListed = 16
	// roleUncounted marks a step with children of a workflow that counts
	// only its leaves' ends (see workflowsteps.go): its success leaves
	// the workflow's row alone, and any end of it leaves the count.
	roleUncounted = 32
)

// Dependency is one parent of a task and the condition it must meet.
type Dependency struct {
	ParentID int64
	When     contracts.Condition
}

// CreateTask inserts a task with its first history row and event in one
// transaction. When the (type, biz_key) pair exists already it returns the
// existing task and dedup=true; the unique index decides, never a prior read.
// It is CreateTasks with one item: one INSERT path for every creation.
func (s *Store) CreateTask(ctx context.Context, nt NewTask) (task *Task, dedup bool, err error) {
	res, err := s.CreateTasks(ctx, []NewTask{nt})
	if err != nil {
		return nil, false, err
	}
	return res[0].Task, res[0].Deduplicated, nil
}

// HistoryRow is one row of task_history.
type HistoryRow struct {
	From    contracts.Status
	To      contracts.Status
	Attempt int
	Reason  string
	Actor   string
	EventID string
	At      time.Time
}

// History returns a task's transfers, oldest first. A task with no history
// does not exist.
func (s *Store) History(ctx context.Context, taskID int64) ([]HistoryRow, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT from_status, to_status, attempt, reason, actor, event_id, created_at
		FROM task_history WHERE task_id = ? ORDER BY id`, taskID)
	if err != nil {
		return nil, fmt.Errorf("history of task %d: %w", taskID, err)
	}
	defer rows.Close()
	var out []HistoryRow
	for rows.Next() {
		var h HistoryRow
		var from, to string
		if err := rows.Scan(&from, &to, &h.Attempt, &h.Reason, &h.Actor, &h.EventID, &h.At); err != nil {
			return nil, fmt.Errorf("scan history of task %d: %w", taskID, err)
		}
		h.From, h.To = contracts.Status(from), contracts.Status(to)
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("history of task %d: %w", taskID, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("task %d: %w", taskID, ErrNotFound)
	}
	return out, nil
}

func (s *Store) actorOr(actor string) string {
	if actor != "" {
		return actor
	}
	return s.actor
}
