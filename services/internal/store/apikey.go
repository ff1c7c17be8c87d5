package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Errors of the API key methods.
var (
	// ErrNameTaken: an API key of that name exists, revoked or not; names
	// are never reused, so history rows that name a key keep their meaning.
	ErrNameTaken = errors.New("api key name already used")
	// ErrRevoked: the key was revoked before.
	ErrRevoked = errors.New("api key already revoked")
)

// APIKey is a row of api_keys. The token itself is never stored; TokenHash
// is its SHA-256.
type APIKey struct {
	ID         int64
	Name       string
	Role       string
	TokenHash  []byte
	Prefix     string
	CreatedAt  time.Time
	LastUsedAt *time.Time
	ExpiresAt  *time.Time
	RevokedAt  *time.Time
}

// NewAPIKey is what CreateAPIKey stores.
type NewAPIKey struct {
	Name      string
	Role      string
	TokenHash []byte
	Prefix    string
	// ExpiresAt, when set, ends the key at that time.
	ExpiresAt *time.Time
}

const apiKeyColumns = `id, name, role, token_hash, prefix, created_at, last_used_at, expires_at, revoked_at`

func scanAPIKey(r rowScanner) (*APIKey, error) {
	var k APIKey
	var used, expires, revoked sql.NullTime
	if err := r.Scan(&k.ID, &k.Name, &k.Role, &k.TokenHash, &k.Prefix, &k.CreatedAt, &used, &expires, &revoked); err != nil {
		return nil, err
	}
	k.LastUsedAt, k.ExpiresAt, k.RevokedAt = timePtr(used), timePtr(expires), timePtr(revoked)
	return &k, nil
}

func timePtr(t sql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	v := t.Time
	return &v
}

// CreateAPIKey stores a key; a name used before is ErrNameTaken and
// nothing is written.
func (s *Store) CreateAPIKey(ctx context.Context, k NewAPIKey) (*APIKey, error) {
	if len(k.TokenHash) != 32 {
		return nil, fmt.Errorf("create api key %q: token hash is %d bytes, want 32 (SHA-256)", k.Name, len(k.TokenHash))
	}
	var expires any
	if k.ExpiresAt != nil {
		expires = k.ExpiresAt.UTC()
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO api_keys (name, role, token_hash, prefix, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?)`, k.Name, k.Role, k.TokenHash, k.Prefix, s.now().UTC(), expires)
	if isDuplicateKey(err) {
		return nil, fmt.Errorf("create api key %q: %w", k.Name, ErrNameTaken)
	}
	if err != nil {
		return nil, fmt.Errorf("create api key %q: %w", k.Name, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return nil, fmt.Errorf("create api key %q: %w", k.Name, err)
	}
	return s.apiKeyWhere(ctx, "id = ?", id)
}

// APIKeyByHash loads the key whose token hashes to hash, revoked and
// expired ones included (the caller decides); none is ErrNotFound.
func (s *Store) APIKeyByHash(ctx context.Context, hash []byte) (*APIKey, error) {
	return s.apiKeyWhere(ctx, "token_hash = ?", hash)
}

// APIKeyByName loads a key by name; none is ErrNotFound.
func (s *Store) APIKeyByName(ctx context.Context, name string) (*APIKey, error) {
	return s.apiKeyWhere(ctx, "name = ?", name)
}

func (s *Store) apiKeyWhere(ctx context.Context, where string, arg any) (*APIKey, error) {
	k, err := scanAPIKey(s.db.QueryRowContext(ctx, `SELECT `+apiKeyColumns+` FROM api_keys WHERE `+where, arg))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("api key: %w", ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("load api key: %w", err)
	}
	return k, nil
}

// ListAPIKeys loads every key, revoked ones included, oldest first.
func (s *Store) ListAPIKeys(ctx context.Context) ([]APIKey, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+apiKeyColumns+` FROM api_keys ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	defer rows.Close()
	out := []APIKey{}
	for rows.Next() {
		k, err := scanAPIKey(rows)
		if err != nil {
			return nil, fmt.Errorf("scan api key: %w", err)
		}
		out = append(out, *k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return out, nil
}

// RevokeAPIKey ends the key called name at once in MySQL; processes that
// cached it stop accepting it within their cache period. An unknown name
// is ErrNotFound, a revoked key ErrRevoked; neither changes anything.
func (s *Store) RevokeAPIKey(ctx context.Context, name string) (*APIKey, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE api_keys SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL`,
		s.now().UTC(), name)
	if err != nil {
		return nil, fmt.Errorf("revoke api key %q: %w", name, err)
	}
	k, err := s.APIKeyByName(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("revoke api key %q: %w", name, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return nil, fmt.Errorf("revoke api key %q: %w", name, ErrRevoked)
	}
	return k, nil
}

// TouchAPIKey records that the key was used at at.
func (s *Store) TouchAPIKey(ctx context.Context, id int64, at time.Time) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE api_keys SET last_used_at = ? WHERE id = ?`, at.UTC(), id); err != nil {
		return fmt.Errorf("touch api key %d: %w", id, err)
	}
	return nil
}

// CountUsableAPIKeys counts the keys that are neither revoked nor expired
// at now: whether "keys are configured".
func (s *Store) CountUsableAPIKeys(ctx context.Context, now time.Time) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM api_keys
		WHERE revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`, now.UTC()).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count api keys: %w", err)
	}
	return n, nil
}

// TaskCreator returns the actor of a task's creating history row: who
// submitted it. An unknown task is ErrNotFound.
func (s *Store) TaskCreator(ctx context.Context, taskID int64) (string, error) {
	var actor string
	err := s.db.QueryRowContext(ctx, `SELECT actor FROM task_history WHERE task_id = ? ORDER BY id LIMIT 1`, taskID).Scan(&actor)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("task %d: %w", taskID, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("creator of task %d: %w", taskID, err)
	}
	return actor, nil
}
