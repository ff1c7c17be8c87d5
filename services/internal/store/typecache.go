package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/axsched/ax/services/internal/clock"
)

// TypeCache reads task types through a short-lived cache. Type settings
// (defaults, pause, limits) sit on every hot path — each submission,
// dispatch and claim — but change rarely, so each service reads them at most
// once per TTL per type; a change through the API reaches it within the TTL.
// Unknown types are not cached, so a freshly registered type is seen at
// once; while the database cannot be read, an expired entry is served.
// Callers that miss together share one read: when an entry expires under
// load, every submission arriving during the read would otherwise make
// its own.
type TypeCache struct {
	store *Store
	// load reads a type from MySQL (tests count the reads).
	load  func(ctx context.Context, name string) (*TaskType, error)
	ttl   time.Duration
	clock clock.Clock

	mu    sync.Mutex
	types map[string]cachedType
	reads singleflight.Group
}

// typeReadTimeout bounds a shared read, which runs apart from the
// context of the caller that started it: that caller giving up must not
// fail the others waiting on the same read.
const typeReadTimeout = 10 * time.Second

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
	return &TypeCache{store: s, load: s.GetType, ttl: ttl, clock: clk, types: map[string]cachedType{}}
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
	t, err := c.read(ctx, name, now)
	if err != nil {
		if ok && !errors.Is(err, ErrNotFound) {
			// MySQL is briefly unreachable: stale settings beat none.
			return e.t, nil
		}
		return nil, err
	}
	return t, nil
}

// read loads name from MySQL, joining a read of it already under way, and
// caches it as of now (the start of the read that was made). It returns
// when the read is done or ctx ends.
func (c *TypeCache) read(ctx context.Context, name string, now time.Time) (*TaskType, error) {
	ch := c.reads.DoChan(name, func() (any, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), typeReadTimeout)
		defer cancel()
		t, err := c.load(rctx, name)
		if err != nil {
			return nil, err
		}
		c.mu.Lock()
		c.types[name] = cachedType{t: t, at: now}
		c.mu.Unlock()
		return t, nil
	})
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*TaskType), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("get task type %q: %w", name, ctx.Err())
	}
}
