package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
)

// Rollout is a row of type_rollouts: a type's gray release of a canary
// executor version, its plan, its guard and where it stands.
type Rollout struct {
	Type           string
	Version        string
	Steps          []int
	StepIndex      int
	Percent        int
	StepTime       time.Duration
	Grace          time.Duration
	Window         time.Duration
	MinSamples     int
	MaxP99Worse    float64
	MaxFailureDiff float64
	MaxTimeoutDiff float64
	State          string
	// Revision fences every change (MoveRollout).
	Revision      int64
	StepStartedAt time.Time
}

// Active reports whether the rollout still moves: running or paused.
func (r *Rollout) Active() bool {
	return r.State == contracts.RolloutRunning || r.State == contracts.RolloutPaused
}

// RolloutMove is one change of a rollout, as its log row says it.
type RolloutMove struct {
	Action  string
	Reason  string
	Figures string
	Actor   string
}

// ErrRolloutActive is a start refused because the type's rollout is still
// running or paused.
var ErrRolloutActive = errors.New("the type already has a rollout in progress")

const rolloutColumns = `task_type, canary_version, steps, step_index, percent, step_ms, grace_ms, window_ms,
	min_samples, max_p99_worse, max_failure_diff, max_timeout_diff, state, revision, step_started_at`

func scanRollout(r rowScanner) (*Rollout, error) {
	var (
		ro                       Rollout
		steps                    string
		stepMs, graceMs, windowM int64
	)
	if err := r.Scan(&ro.Type, &ro.Version, &steps, &ro.StepIndex, &ro.Percent, &stepMs, &graceMs, &windowM,
		&ro.MinSamples, &ro.MaxP99Worse, &ro.MaxFailureDiff, &ro.MaxTimeoutDiff, &ro.State, &ro.Revision,
		&ro.StepStartedAt); err != nil {
		return nil, err
	}
	for _, f := range strings.Split(steps, ",") {
		n, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("rollout of %s: step %q: %w", ro.Type, f, err)
		}
		ro.Steps = append(ro.Steps, n)
	}
	ro.StepTime, ro.Grace, ro.Window = ms(stepMs), ms(graceMs), ms(windowM)
	return &ro, nil
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

// GetRollout reads a type's rollout; ErrNotFound when it never had one.
func (s *Store) GetRollout(ctx context.Context, taskType string) (*Rollout, error) {
	ro, err := scanRollout(s.db.QueryRowContext(ctx, `SELECT `+rolloutColumns+` FROM type_rollouts WHERE task_type = ?`, taskType))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("rollout of %q: %w", taskType, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("rollout of %q: %w", taskType, err)
	}
	return ro, nil
}

// Rollouts lists every type's rollout, whatever its state (one row a
// type).
func (s *Store) Rollouts(ctx context.Context) ([]*Rollout, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+rolloutColumns+` FROM type_rollouts ORDER BY task_type`)
	if err != nil {
		return nil, fmt.Errorf("list rollouts: %w", err)
	}
	defer rows.Close()
	var out []*Rollout
	for rows.Next() {
		ro, err := scanRollout(rows)
		if err != nil {
			return nil, fmt.Errorf("list rollouts: %w", err)
		}
		out = append(out, ro)
	}
	return out, rows.Err()
}

// StartRollout begins ro (running, at its first step) on a registered
// type, replacing a finished rollout; a running or paused one is
// ErrRolloutActive, an unknown type ErrNotFound.
func (s *Store) StartRollout(ctx context.Context, ro Rollout, actor string) (*Rollout, error) {
	var out *Rollout
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		var name string
		if err := tx.QueryRowContext(ctx, `SELECT name FROM task_types WHERE name = ? FOR UPDATE`, ro.Type).Scan(&name); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("task type %q: %w", ro.Type, ErrNotFound)
			}
			return fmt.Errorf("lock task type %q: %w", ro.Type, err)
		}
		old, err := scanRollout(tx.QueryRowContext(ctx, `SELECT `+rolloutColumns+` FROM type_rollouts WHERE task_type = ? FOR UPDATE`, ro.Type))
		switch {
		case err == nil && old.Active():
			return fmt.Errorf("rollout of %q to %s: %w", ro.Type, old.Version, ErrRolloutActive)
		case err == nil:
			ro.Revision = old.Revision + 1
		case errors.Is(err, sql.ErrNoRows):
			ro.Revision = 1
		default:
			return fmt.Errorf("lock rollout of %q: %w", ro.Type, err)
		}
		ro.State, ro.StepIndex, ro.Percent = contracts.RolloutRunning, 0, ro.Steps[0]
		ro.StepStartedAt = s.now().UTC().Truncate(time.Millisecond)
		if _, err := tx.ExecContext(ctx, `REPLACE INTO type_rollouts (`+rolloutColumns+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			ro.Type, ro.Version, joinInts(ro.Steps), ro.StepIndex, ro.Percent, ro.StepTime.Milliseconds(),
			ro.Grace.Milliseconds(), ro.Window.Milliseconds(), ro.MinSamples, ro.MaxP99Worse, ro.MaxFailureDiff,
			ro.MaxTimeoutDiff, ro.State, ro.Revision, ro.StepStartedAt); err != nil {
			return fmt.Errorf("start rollout of %q: %w", ro.Type, err)
		}
		move := RolloutMove{Action: "start", Reason: fmt.Sprintf("rollout of %s started at %d%%", ro.Version, ro.Percent), Actor: actor}
		if err := s.logRollout(ctx, tx, &ro, 0, move); err != nil {
			return err
		}
		out = &ro
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.notifyOutbox()
	return out, nil
}

// MoveRollout changes a type's rollout under its row lock: fn edits the
// row and says why; the change is stored with a log row, the routing
// columns of the type and a RolloutChanged event, all in one transaction.
// When revision is positive the rollout must still be at it (a guard
// acting on what it read), or the move is an ErrConflict and nothing
// changes. An error from fn rolls everything back.
func (s *Store) MoveRollout(ctx context.Context, taskType string, revision int64, fn func(*Rollout) (RolloutMove, error)) (*Rollout, error) {
	var out *Rollout
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		ro, err := scanRollout(tx.QueryRowContext(ctx, `SELECT `+rolloutColumns+` FROM type_rollouts WHERE task_type = ? FOR UPDATE`, taskType))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("rollout of %q: %w", taskType, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("lock rollout of %q: %w", taskType, err)
		}
		if revision > 0 && ro.Revision != revision {
			return fmt.Errorf("rollout of %q moved on (revision %d, not %d): %w", taskType, ro.Revision, revision, ErrConflict)
		}
		from := ro.Percent
		move, err := fn(ro)
		if err != nil {
			return err
		}
		ro.Revision++
		if _, err := tx.ExecContext(ctx, `UPDATE type_rollouts SET step_index = ?, percent = ?, state = ?, revision = ?,
			step_started_at = ? WHERE task_type = ?`, ro.StepIndex, ro.Percent, ro.State, ro.Revision, ro.StepStartedAt, taskType); err != nil {
			return fmt.Errorf("move rollout of %q: %w", taskType, err)
		}
		if err := s.logRollout(ctx, tx, ro, from, move); err != nil {
			return err
		}
		out = ro
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.notifyOutbox()
	return out, nil
}

// logRollout writes what routing reads (the type's canary columns), the
// log row and the event of one move.
func (s *Store) logRollout(ctx context.Context, tx *sql.Tx, ro *Rollout, from int, m RolloutMove) error {
	actor := s.actorOr(m.Actor)
	if _, err := tx.ExecContext(ctx, `UPDATE task_types SET canary_version = ?, canary_percent = ?, canary_grace_ms = ?
		WHERE name = ?`, ro.Version, ro.Percent, ro.Grace.Milliseconds(), ro.Type); err != nil {
		return fmt.Errorf("route rollout of %q: %w", ro.Type, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO rollout_log (task_type, action, from_percent, to_percent, reason, figures, actor)
		VALUES (?, ?, ?, ?, ?, NULLIF(?, ''), ?)`, ro.Type, m.Action, from, ro.Percent, Truncate(m.Reason, 1024), m.Figures, actor); err != nil {
		return fmt.Errorf("log rollout of %q: %w", ro.Type, err)
	}
	payload, err := json.Marshal(events.RolloutChanged{Type: ro.Type, Version: ro.Version, Action: m.Action,
		FromPercent: from, ToPercent: ro.Percent, Reason: m.Reason, Actor: actor, At: s.now().UTC()})
	if err != nil {
		return fmt.Errorf("encode rollout change of %q: %w", ro.Type, err)
	}
	return insertOutbox(ctx, tx, outboxEvent{Subject: events.SubjectRolloutChanged, Type: events.TypeRolloutChanged,
		CorrelationID: ro.Type, Payload: payload})
}

// RolloutLog returns the type's latest rollout moves, newest first.
func (s *Store) RolloutLog(ctx context.Context, taskType string, limit int) ([]contracts.RolloutLog, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT action, from_percent, to_percent, reason, COALESCE(figures, ''), actor, created_at
		FROM rollout_log WHERE task_type = ? ORDER BY id DESC LIMIT ?`, taskType, limit)
	if err != nil {
		return nil, fmt.Errorf("rollout log of %q: %w", taskType, err)
	}
	defer rows.Close()
	out := []contracts.RolloutLog{}
	for rows.Next() {
		var l contracts.RolloutLog
		if err := rows.Scan(&l.Action, &l.FromPercent, &l.ToPercent, &l.Reason, &l.Figures, &l.Actor, &l.At); err != nil {
			return nil, fmt.Errorf("rollout log of %q: %w", taskType, err)
		}
		out = append(out, l)
	}
	return out, rows.Err()
}

// RolloutSample is one finished attempt of a type in rollout.
type RolloutSample struct {
	Version  string
	Outcome  string // success, failed, timeout
	Duration time.Duration
}

// RecordSample returns a TransferParams.Also hook that stores one finished
// attempt for the guard in the outcome's own transaction: a sample exists
// exactly when its outcome was recorded.
func RecordSample(taskType string, sm RolloutSample) func(ctx context.Context, tx Execer) error {
	return func(ctx context.Context, tx Execer) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO rollout_samples (task_type, version, outcome, duration_ms)
			VALUES (?, ?, ?, ?)`, taskType, sm.Version, sm.Outcome, sm.Duration.Milliseconds()); err != nil {
			return fmt.Errorf("record rollout sample of %s: %w", taskType, err)
		}
		return nil
	}
}

// maxWindowSamples bounds what one guard pass reads of a type.
const maxWindowSamples = 200000

// RolloutSamples returns the type's samples of the last window (database
// clock), newest first, at most maxWindowSamples.
func (s *Store) RolloutSamples(ctx context.Context, taskType string, window time.Duration) ([]RolloutSample, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT version, outcome, duration_ms FROM rollout_samples
		WHERE task_type = ? AND finished_at >= NOW(3) - INTERVAL ? MICROSECOND ORDER BY finished_at DESC LIMIT ?`,
		taskType, window.Microseconds(), maxWindowSamples)
	if err != nil {
		return nil, fmt.Errorf("rollout samples of %q: %w", taskType, err)
	}
	defer rows.Close()
	var out []RolloutSample
	for rows.Next() {
		var sm RolloutSample
		var d int64
		if err := rows.Scan(&sm.Version, &sm.Outcome, &d); err != nil {
			return nil, fmt.Errorf("rollout samples of %q: %w", taskType, err)
		}
		sm.Duration = ms(d)
		out = append(out, sm)
	}
	return out, rows.Err()
}

// PruneRolloutSamples deletes up to limit samples older than age.
func (s *Store) PruneRolloutSamples(ctx context.Context, age time.Duration, limit int) (int64, error) {
	res, err := s.db.ExecContext(ctx, `DELETE FROM rollout_samples WHERE finished_at < NOW(3) - INTERVAL ? MICROSECOND
		ORDER BY id LIMIT ?`, age.Microseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("prune rollout samples: %w", err)
	}
	return res.RowsAffected()
}
