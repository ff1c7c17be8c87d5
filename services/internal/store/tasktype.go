package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/contracts"
)

// TaskType is a row of task_types.
type TaskType struct {
	Name       string
	TimeoutMs  int64
	MaxRetries int
	Priority   contracts.Priority
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
	var t TaskType
	var prio int
	err := s.db.QueryRowContext(ctx, `SELECT name, timeout_ms, max_retries, priority FROM task_types WHERE name = ?`, name).
		Scan(&t.Name, &t.TimeoutMs, &t.MaxRetries, &prio)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("task type %q: %w", name, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get task type %q: %w", name, err)
	}
	t.Priority = contracts.PriorityFromRank(prio)
	return &t, nil
}
