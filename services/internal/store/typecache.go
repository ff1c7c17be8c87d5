package store

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/axsched/ax/services/internal/clock"
)

// TypeCache reads task types through a short-lived cache. Type settings
// (defaults, pause, limits) sit on every hot path — each submission,
// dispatch and claim — but change rarely, so each service reads them at most
// once per TTL per type; a change through the API reaches it within the TTL.
// Unknown types are not cached, so a freshly registered type is seen at
// once; while the database cannot be read, an expired entry is served.
type TypeCache struct {
	store *Store
	ttl   time.Duration
	clock clock.Clock

	mu    sync.Mutex
	types map[string]cachedType
}

type cachedType struct {
	t  *TaskType
	at time.Time
}

// NewTypeCache caches s's task types for ttl, measured on clk (nil: the
// local clock), which tests advance instead of waiting the TTL out.
func NewTypeCache(s *Store, ttl time.Duration, clk clock.Clock) *TypeCache {
	if clk == nil {
		clk = clock.System{}
	}
	return &TypeCache{store: s, ttl: ttl, clock: clk, types: map[string]cachedType{}}
}

// Get returns the type, from the cache when it is fresh.
func (c *TypeCache) Get(ctx context.Context, name string) (*TaskType, error) {
	// An entry is as old as the moment before its read: a change committed
	// while the read was under way must not look newer than it.
	now := c.clock.Now()
	c.mu.Lock()
	e, ok := c.types[name]
	c.mu.Unlock()
	if ok && now.Sub(e.at) < c.ttl {
		return e.t, nil
	}
	t, err := c.store.GetType(ctx, name)
	if err != nil {
		if ok && !errors.Is(err, ErrNotFound) {
			// MySQL is briefly unreachable: stale settings beat none.
			return e.t, nil
		}
		return nil, err
	}
	c.mu.Lock()
	c.types[name] = cachedType{t: t, at: now}
	c.mu.Unlock()
	return t, nil
}
