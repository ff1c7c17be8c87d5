package executor

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// acquireLimitScript takes a member of a type's cluster-wide running set:
// members name one claim of a task, scored by their expiry on the Redis clock, so a dead
// executor's members lapse by themselves.
// KEYS[1] = running set, ARGV = member, limit, ttl ms. Returns 1 if held.
var acquireLimitScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
  return 1
end
return 0
`)

// renewLimitScript pushes a held member's expiry out; a lapsed member is not
// re-added (the slot may belong to someone else now).
var renewLimitScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZADD', KEYS[1], 'XX', 'CH', now + tonumber(ARGV[2]), ARGV[1])
`)

func (e *Executor) releaseLimit(r *run) {
	if r.limitKey == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.rdb.ZRem(ctx, r.limitKey, r.limitMember()).Err(); err != nil {
		e.logger.Warn("release concurrency slot failed; it expires by itself", "task_id", r.task.ID, "err", err)
	}
}
