package store

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-sql-driver/mysql"
)

// Limits of an idempotency key, fixed by the idempotency_keys columns.
const (
	// MaxOnceScopeLen bounds OnceParams.Scope in characters (VARCHAR(128),
	// the length of a task type name).
	MaxOnceScopeLen = 128
	// MaxOnceKeyLen bounds OnceParams.Key in bytes (VARBINARY(255)).
	MaxOnceKeyLen = 255
)

// onceTries bounds how often Once starts over after InnoDB chose its
// INSERT as a deadlock victim. Concurrent INSERTs of one key take shared gap
// locks for the duplicate check and then want insert-intention locks on the
// same gap, so several waiters on a key (most of all when its holder rolls
// back) deadlock among themselves. A victim has not run fn and wrote
// nothing, so starting over is always safe.
const (
	onceTries      = 10
	onceBackoff    = 5 * time.Millisecond
	onceBackoffMax = 200 * time.Millisecond
)

// OnceParams names one side effect for Once.
type OnceParams struct {
	// Scope is the namespace of Key; through the executor it is the task
	// type, so two types may use the same key for different effects.
	Scope string
	// Key identifies the effect within Scope. It is compared byte for byte:
	// "a", "A" and "a " are three different keys.
	Key string
	// TaskID and Attempt record which run performed the effect, so a person
	// can trace it; they take no part in deduplication.
	TaskID  int64
	Attempt int
}

func (p OnceParams) validate() error {
	switch {
	case p.Scope == "":
		return errors.New("idempotency scope is required")
	case utf8.RuneCountInString(p.Scope) > MaxOnceScopeLen:
		return fmt.Errorf("idempotency scope is longer than %d characters", MaxOnceScopeLen)
	case p.Key == "":
		return fmt.Errorf("idempotency key is required (scope %s)", p.Scope)
	case len(p.Key) > MaxOnceKeyLen:
		return fmt.Errorf("idempotency key is %d bytes, more than %d (scope %s)", len(p.Key), MaxOnceKeyLen, p.Scope)
	}
	return nil
}

// Once runs fn at most once per (Scope, Key), however often it is called,
// from however many processes, under however many task IDs, so a handler's
// side effect survives duplicate delivery and resubmission.
//
// The unique key of idempotency_keys decides, never a prior read: Once
// inserts the key in a transaction and runs fn while that transaction holds
// the row lock. A concurrent call with the same key blocks on the lock and,
// once fn's transaction commits, sees the duplicate and returns without
// running fn. If fn returns nil the key is committed; if it returns an error
// (or panics) the key is rolled back, so a later retry runs fn again.
//
// ran reports whether fn was called: ran=false with a nil error means the
// effect already happened under this key; ran=true with an error means fn
// failed (its error is returned unchanged) or, rarely, that fn succeeded but
// the key could not be committed.
//
// One window remains: if the process dies, or the commit fails, after fn's
// effect happened but before the key is committed, the key is not stored and
// a retry runs fn again. Where a duplicate would hurt, make fn idempotent
// toward its target as well, for instance by passing the same key to a
// target that deduplicates on it.
//
// Each call holds one connection of Once's own pool (SizeOncePool), and
// waiters hold one each, while fn runs; a waiter gives up after
// innodb_lock_wait_timeout with an error.
func (s *Store) Once(ctx context.Context, p OnceParams, fn func(ctx context.Context) error) (ran bool, err error) {
	if err := p.validate(); err != nil {
		return false, err
	}
	// Full jitter around each step (the library's default factor of 0.5)
	// lets the waiters line up instead of colliding again.
	b := backoff.WithContext(backoff.WithMaxRetries(backoff.NewExponentialBackOff(
		backoff.WithInitialInterval(onceBackoff), backoff.WithMaxInterval(onceBackoffMax),
		backoff.WithMaxElapsedTime(0)), onceTries-1), ctx)
	var victim error // the last try's error when it was a deadlock victim
	err = backoff.Retry(func() error {
		ran, err = s.once(ctx, p, fn)
		victim = nil
		switch {
		case err == nil:
			return nil
		case ran || !isDeadlockVictim(err):
			return backoff.Permanent(err)
		}
		victim = err
		return err
	}, b)
	if victim != nil && !errors.Is(err, victim) {
		// ctx ended while waiting to start over.
		return false, fmt.Errorf("once %s/%q: %w (after: %w)", p.Scope, p.Key, context.Cause(ctx), victim)
	}
	return ran, err
}

func (s *Store) once(ctx context.Context, p OnceParams, fn func(ctx context.Context) error) (ran bool, err error) {
	// The transaction is deliberately not bound to ctx (beginDetached):
	// database/sql rolls a transaction back the moment its context ends,
	// which would release the key while fn may still be running and let a
	// duplicate start the effect alongside it. It ends when fn returns
	// instead, and an effect that completed is committed even if ctx ended
	// meanwhile.
	tx, err := beginDetached(ctx, s.onceDB, nil)
	if err != nil {
		return false, fmt.Errorf("once %s/%q: begin: %w", p.Scope, p.Key, err)
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback()
		}
	}()
	// ctx does bound the wait for a concurrent holder of the same key.
	_, err = tx.ExecContext(ctx, `INSERT INTO idempotency_keys (scope, idem_key, task_id, attempt, created_at)
		VALUES (?, ?, ?, ?, ?)`, p.Scope, []byte(p.Key), p.TaskID, p.Attempt, s.now().UTC())
	if isDuplicateKey(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("once %s/%q: insert key: %w", p.Scope, p.Key, err)
	}
	// fn's error is the handler's own and is returned as it is, so the
	// task records the handler's message rather than ours.
	if err := fn(ctx); err != nil {
		return true, err
	}
	committed = true
	if err := tx.Commit(); err != nil {
		return true, fmt.Errorf("once %s/%q: effect ran but its key was not recorded: commit: %w", p.Scope, p.Key, err)
	}
	return true, nil
}

// isDeadlockVictim reports a deadlock (1213) only, unlike IsDeadlock: after
// a lock wait timeout the holder is still running fn, and waiting a second
// time would only double the delay before the same answer.
func isDeadlockVictim(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

// PruneIdempotencyKeys deletes up to limit keys recorded longer ago than
// olderThan (database clock), oldest first, and returns how many went. A
// pruned key no longer guards its effect: if the same work comes back, the
// effect runs again.
func (s *Store) PruneIdempotencyKeys(ctx context.Context, olderThan time.Duration, limit int) (int64, error) {
	if olderThan <= 0 || limit <= 0 {
		return 0, fmt.Errorf("prune idempotency keys: retention %s and limit %d must be positive", olderThan, limit)
	}
	r, err := s.db.ExecContext(ctx, `DELETE FROM idempotency_keys
		WHERE created_at < NOW(3) - INTERVAL ? MICROSECOND ORDER BY created_at LIMIT ?`, olderThan.Microseconds(), limit)
	if err != nil {
		return 0, fmt.Errorf("prune idempotency keys: %w", err)
	}
	return r.RowsAffected()
}
