package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
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
	// Canary is the routing half of the type's rollout (nil: none; see
	// Rollout for the plan and the guard). Changed only by the rollout's
	// own writes, never by UpdateType.
	Canary *Canary
}

// Canary is how a type's new tasks are split between versions: tasks whose
// key hashes below Percent go to executors of Version, the rest to the
// others; a task that ran keeps its version. Grace bounds how long a task
// waits for an absent version before it falls back.
type Canary struct {
	Version string
	Percent int
	Grace   time.Duration
}

// API converts the row to its public JSON shape.
func (t *TaskType) API() contracts.TaskType {
	return contracts.TaskType{
		Name:         t.Name,
		Timeout:      msString(t.TimeoutMs),
		MaxRetries:   t.MaxRetries,
		Priority:     t.Priority,
		Concurrency:  t.Concurrency,
		BackoffBase:  msString(t.BackoffBaseMs),
		BackoffCap:   msString(t.BackoffCapMs),
		FailSilently: t.FailSilently,
		Paused:       t.Paused,
		UpdatedAt:    t.UpdatedAt,
	}
}

func msString(ms int64) string {
	return (time.Duration(ms) * time.Millisecond).String()
}

const typeColumns = `name, timeout_ms, max_retries, priority, concurrency, backoff_base_ms, backoff_cap_ms,
	fail_silently, paused, updated_at, canary_version, canary_percent, canary_grace_ms`

func scanType(r rowScanner) (*TaskType, error) {
	var t TaskType
	var prio, pct int
	var canary sql.NullString
	var graceMs int64
	err := r.Scan(&t.Name, &t.TimeoutMs, &t.MaxRetries, &prio, &t.Concurrency, &t.BackoffBaseMs,
		&t.BackoffCapMs, &t.FailSilently, &t.Paused, &t.UpdatedAt, &canary, &pct, &graceMs)
	if err != nil {
		return nil, err
	}
	if canary.Valid {
		t.Canary = &Canary{Version: canary.String, Percent: pct, Grace: time.Duration(graceMs) * time.Millisecond}
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

// ListTypes loads every registered task type, ordered by name.
func (s *Store) ListTypes(ctx context.Context) ([]TaskType, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+typeColumns+` FROM task_types ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list task types: %w", err)
	}
	defer rows.Close()
	out := []TaskType{}
	for rows.Next() {
		t, err := scanType(rows)
		if err != nil {
			return nil, fmt.Errorf("scan task type: %w", err)
		}
		out = append(out, *t)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list task types: %w", err)
	}
	return out, nil
}

// UpdateType changes a task type's settings. In one transaction it locks the
// row, lets fn change the loaded type, writes every column back and queues a
// TaskTypeChanged event, so concurrent updates apply one after the other and
// services caching the settings always hear of the change. fn cannot rename
// the type. An error from fn rolls everything back and is returned wrapped;
// an unknown type is ErrNotFound and nothing is created, because types are
// registered by the executors that serve them. actor names who changed the
// type in the event; empty means the store's actor.
func (s *Store) UpdateType(ctx context.Context, name, actor string, fn func(*TaskType) error) (*TaskType, error) {
	// DATETIME(3) keeps milliseconds; truncating here makes the returned
	// time equal to the stored one on MySQL (which rounds) and MariaDB
	// (which truncates) alike.
	at := s.now().UTC().Truncate(time.Millisecond)
	actor = s.actorOr(actor)
	var out *TaskType
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		t, err := scanType(tx.QueryRowContext(ctx, `SELECT `+typeColumns+` FROM task_types WHERE name = ? FOR UPDATE`, name))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("task type %q: %w", name, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("lock task type %q: %w", name, err)
		}
		if err := fn(t); err != nil {
			return fmt.Errorf("update task type %q: %w", name, err)
		}
		t.Name, t.UpdatedAt = name, at
		if t.Priority.Rank() < 0 {
			return fmt.Errorf("update task type %q: unknown priority %q", name, t.Priority)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE task_types SET timeout_ms = ?, max_retries = ?, priority = ?,
			concurrency = ?, backoff_base_ms = ?, backoff_cap_ms = ?, fail_silently = ?, paused = ?, updated_at = ?
			WHERE name = ?`,
			t.TimeoutMs, t.MaxRetries, t.Priority.Rank(), t.Concurrency, t.BackoffBaseMs, t.BackoffCapMs,
			t.FailSilently, t.Paused, t.UpdatedAt, name); err != nil {
			return fmt.Errorf("update task type %q: %w", name, err)
		}
		payload, err := json.Marshal(events.TaskTypeChanged{
			Name: name, Paused: t.Paused, Concurrency: t.Concurrency, Actor: actor, At: at,
		})
		if err != nil {
			return fmt.Errorf("encode change of task type %q: %w", name, err)
		}
		if err := insertOutbox(ctx, tx, outboxEvent{Subject: events.SubjectTypeChanged,
			Type: events.TypeTaskTypeChanged, CorrelationID: name, Payload: payload}); err != nil {
			return fmt.Errorf("task type %q: %w", name, err)
		}
		out = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.notifyOutbox()
	return out, nil
}
