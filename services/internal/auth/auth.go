package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/store"
)

// Defaults of Config.
const (
	// CacheTTLDefault is how long a looked-up key (or an unknown token) is
	// trusted without asking MySQL again: a revocation takes effect in
	// every process within this period.
	CacheTTLDefault = 5 * time.Second
	// TouchEveryDefault bounds how often a key's last_used_at is written.
	TouchEveryDefault = time.Minute
	// cacheMax bounds the cache, which unknown tokens (chosen by anybody)
	// would otherwise grow without end; a full cache is emptied.
	cacheMax = 10000
)

// Errors of Verify, each answered 401.
var (
	ErrNoToken      = errors.New("no bearer token: send Authorization: Bearer <token>")
	ErrUnknownToken = errors.New("the bearer token is not an API key of this ax")
	ErrRevoked      = errors.New("the API key was revoked")
	ErrExpired      = errors.New("the API key has expired")
)

// Key is the authenticated caller of a request.
type Key struct {
	Name string
	Role Role
}

// KeyStore is the part of the store the authenticator reads and writes.
type KeyStore interface {
	APIKeyByHash(ctx context.Context, hash []byte) (*store.APIKey, error)
	TouchAPIKey(ctx context.Context, id int64, at time.Time) error
}

// Config tunes an Authenticator.
type Config struct {
	// CacheTTL: see CacheTTLDefault.
	CacheTTL time.Duration
	// TouchEvery: see TouchEveryDefault.
	TouchEvery time.Duration
}

type cached struct {
	key     *store.APIKey // nil: no such token
	fetched time.Time
}

// Authenticator verifies bearer tokens against the api_keys table.
type Authenticator struct {
	keys   KeyStore
	cfg    Config
	clock  clock.Clock
	logger *slog.Logger

	mu      sync.Mutex
	cache   map[[sha256.Size]byte]cached
	touched map[int64]time.Time
}

// New builds an authenticator.
func New(cfg Config, keys KeyStore, clk clock.Clock, logger *slog.Logger) *Authenticator {
	if cfg.CacheTTL <= 0 {
		cfg.CacheTTL = CacheTTLDefault
	}
	if cfg.TouchEvery <= 0 {
		cfg.TouchEvery = TouchEveryDefault
	}
	return &Authenticator{keys: keys, cfg: cfg, clock: clk, logger: logger,
		cache: map[[sha256.Size]byte]cached{}, touched: map[int64]time.Time{}}
}

// Verify returns the key a token belongs to, or why it is refused
// (ErrNoToken, ErrUnknownToken, ErrRevoked, ErrExpired); any other error
// means the keys could not be read.
func (a *Authenticator) Verify(ctx context.Context, token string) (*Key, error) {
	if token == "" {
		return nil, ErrNoToken
	}
	hash := HashToken(token)
	now := a.clock.Now()
	k, err := a.lookup(ctx, hash, now)
	if err != nil {
		return nil, err
	}
	// The lookup was by hash; comparing again in constant time costs
	// nothing and keeps the check independent of how MySQL or the map
	// matched.
	if k == nil || subtle.ConstantTimeCompare(k.TokenHash, hash[:]) != 1 {
		return nil, ErrUnknownToken
	}
	if k.RevokedAt != nil {
		return nil, ErrRevoked
	}
	if k.ExpiresAt != nil && !now.Before(*k.ExpiresAt) {
		return nil, ErrExpired
	}
	role, err := ParseRole(k.Role)
	if err != nil {
		return nil, fmt.Errorf("api key %q: %w", k.Name, err)
	}
	a.touch(ctx, k.ID, now)
	return &Key{Name: k.Name, Role: role}, nil
}

func (a *Authenticator) lookup(ctx context.Context, hash [sha256.Size]byte, now time.Time) (*store.APIKey, error) {
	a.mu.Lock()
	c, ok := a.cache[hash]
	a.mu.Unlock()
	if ok && now.Sub(c.fetched) < a.cfg.CacheTTL {
		return c.key, nil
	}
	k, err := a.keys.APIKeyByHash(ctx, hash[:])
	if errors.Is(err, store.ErrNotFound) {
		k, err = nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up api key: %w", err)
	}
	a.mu.Lock()
	if len(a.cache) >= cacheMax {
		clear(a.cache)
	}
	a.cache[hash] = cached{key: k, fetched: now}
	a.mu.Unlock()
	return k, nil
}

// touch records a key's use at most once per TouchEvery; a failure is
// logged, never answered, since the request itself was fine.
func (a *Authenticator) touch(ctx context.Context, id int64, now time.Time) {
	a.mu.Lock()
	last, ok := a.touched[id]
	due := !ok || now.Sub(last) >= a.cfg.TouchEvery
	if due {
		a.touched[id] = now
	}
	a.mu.Unlock()
	if !due {
		return
	}
	if err := a.keys.TouchAPIKey(ctx, id, now); err != nil {
		a.logger.Warn("record api key use failed", "api_key_id", id, "err", err)
	}
}

type keyCtx struct{}

// WithKey returns ctx carrying the request's key.
func WithKey(ctx context.Context, k *Key) context.Context {
	return context.WithValue(ctx, keyCtx{}, k)
}

// FromContext returns the request's key; nil when the request carried
// none (an open route, or a process with auth off).
func FromContext(ctx context.Context) *Key {
	k, _ := ctx.Value(keyCtx{}).(*Key)
	return k
}

// KeyName is the name of the request's key, or "" without one: what a
// per-key limit (a rate limiter) keys on.
func KeyName(ctx context.Context) string {
	if k := FromContext(ctx); k != nil {
		return k.Name
	}
	return ""
}
