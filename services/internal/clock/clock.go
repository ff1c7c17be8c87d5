// Package clock gives ax one notion of "now": the Redis server's TIME. Every
// due-time decision uses it (or the database clock inside SQL), so a node
// whose local clock is skewed neither runs tasks early nor misses them.
package clock

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/axsched/ax/services/internal/metrics"
)

// Clock tells the time.
type Clock interface {
	Now() time.Time
}

// System is the local clock.
type System struct{}

// Now returns the local time.
func (System) Now() time.Time { return time.Now() }

// Redis is the local clock corrected by the measured offset to Redis TIME.
// The offset is refreshed by Run; before the first sync it is zero.
type Redis struct {
	rdb    redis.UniversalClient
	local  func() time.Time
	offset atomic.Int64 // nanoseconds to add to local
	logger *slog.Logger
}

// NewRedis builds a Redis clock. local is the node's clock (injectable so
// tests can skew it); nil means time.Now.
func NewRedis(rdb redis.UniversalClient, local func() time.Time, logger *slog.Logger) *Redis {
	if local == nil {
		local = time.Now
	}
	return &Redis{rdb: rdb, local: local, logger: logger}
}

// Now returns the estimated Redis time.
func (c *Redis) Now() time.Time { return c.local().Add(time.Duration(c.offset.Load())) }

// Offset is Redis time minus local time as last measured.
func (c *Redis) Offset() time.Duration { return time.Duration(c.offset.Load()) }

// syncSamples is how many TIME round trips one Sync takes; the tightest
// wins, so one slow round trip (a busy machine, a GC pause) costs nothing.
const syncSamples = 3

// Sync measures the offset. Redis read its clock somewhere inside the round
// trip [t0, t1], so at local time t1 its clock read at least rt: rt - t1 is
// an offset that can only put the estimate behind Redis, never ahead —
// halving the round trip instead would run a task early by up to half a
// slow round trip. Of the samples, the largest such bound is the tightest.
func (c *Redis) Sync(ctx context.Context) error {
	var best time.Duration
	for i := range syncSamples {
		rt, t1, err := c.sample(ctx)
		if err != nil {
			return err
		}
		if off := rt.Sub(t1); i == 0 || off > best {
			best = off
		}
	}
	c.offset.Store(int64(best))
	metrics.ClockSkew.Set(-best.Seconds())
	return nil
}

func (c *Redis) sample(ctx context.Context) (rt, t1 time.Time, err error) {
	rt, err = c.rdb.Time(ctx).Result()
	if err != nil {
		return rt, t1, fmt.Errorf("redis TIME: %w", err)
	}
	return rt, c.local(), nil
}

// Run re-syncs every interval until ctx ends.
func (c *Redis) Run(ctx context.Context, interval time.Duration) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := c.Sync(ctx); err != nil && ctx.Err() == nil {
			c.logger.Warn("clock sync failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
