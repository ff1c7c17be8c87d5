package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/contracts"
)

// TaskType is a row of task_types: a kind of task and the settings its
// tasks inherit.
type TaskType struct {
	Name       string
	TimeoutMs  int64
	MaxRetries int
	Priority   contracts.Priority
	// Concurrency caps RUNNING tasks of the type across the cluster; 0 means
	// no cap beyond each executor's pool.
	Concurrency   int
	BackoffBaseMs int64
	BackoffCapMs  int64
	// FailSilently types end FAILED without a dead letter or alert.
	FailSilently bool
	// Paused types are not dispatched; their tasks wait READY.
	Paused    bool
	UpdatedAt time.Time
}

// API converts the row to its public JSON shape.
func (t *TaskType) API() contracts.TaskType {
	return contracts.TaskType{
		Name:       t.Name,
		Timeout:    (time.Duration(t.TimeoutMs) * time.Millisecond).String(),
		MaxRetries: t.MaxRetries,
		Priority:   t.Priority,
	}
}

const typeColumns = `name, timeout_ms, max_retries, priority, concurrency, backoff_base_ms, backoff_cap_ms,
	fail_silently, paused, updated_at`

func scanType(r rowScanner) (*TaskType, error) {
	var t TaskType
	var prio int
	err := r.Scan(&t.Name, &t.TimeoutMs, &t.MaxRetries, &prio, &t.Concurrency, &t.BackoffBaseMs,
		&t.BackoffCapMs, &t.FailSilently, &t.Paused, &t.UpdatedAt)
	if err != nil {
		return nil, err
	}
	t.Priority = contracts.PriorityFromRank(prio)
	return &t, nil
}

// RegisterType declares a task type with its defaults. An existing type keeps
// its stored configuration: executors declare, operators configure.
func (s *Store) RegisterType(ctx context.Context, t TaskType) error {
	if err := contracts.ValidateTypeName(t.Name); err != nil {
		return err
	}
	_, err := s.db.ExecContext(ctx, `INSERT IGNORE INTO task_types (name, timeout_ms, max_retries, priority)
		VALUES (?, ?, ?, ?)`, t.Name, t.TimeoutMs, t.MaxRetries, t.Priority.Rank())
	if err != nil {
		return fmt.Errorf("register task type %s: %w", t.Name, err)
	}
	return nil
}

// GetType loads a task type.
func (s *Store) GetType(ctx context.Context, name string) (*TaskType, error) {
	t, err := scanType(s.db.QueryRowContext(ctx, `SELECT `+typeColumns+` FROM task_types WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("task type %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get task type %q: %w", name, err)
	}
	return t, nil
}
