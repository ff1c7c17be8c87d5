package executor

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/axsched/ax/services/internal/lease"
)

// acquireLimitScript takes a member of a type's cluster-wide running set:
// members name one claim of a task, scored by their expiry on the Redis clock, so a dead
// executor's members lapse by themselves. A set not marked built was lost
// with Redis and must be rebuilt from MySQL first (rebuildLimitScript).
// KEYS[1] = running set, KEYS[2] = its built mark; ARGV = member, limit,
// ttl ms. Returns 1 if held, 0 if the type is at its limit, -1 if the set
// must be rebuilt.
var acquireLimitScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 0 then
  return -1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), ARGV[1])
  return 1
end
return 0
`)

// rebuildLimitScript fills a lost running set with one member per task
// MySQL says is RUNNING, and marks it built; a set another executor rebuilt
// meanwhile is left alone.
// KEYS[1] = running set, KEYS[2] = its built mark; ARGV[1] = ttl ms,
// ARGV[2..] = members. Returns 1 if it rebuilt the set.
var rebuildLimitScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], now + tonumber(ARGV[1]), ARGV[i])
end
redis.call('SET', KEYS[2], '1')
return 1
`)

// renewLimitScript pushes a held member's expiry out and drops the
// placeholder a rebuild may have added for the same claim. A member that
// is gone is not re-added here (returns 0): the watchdog puts it back only
// once MySQL confirms the task is still this attempt's (restoreLimitScript).
// KEYS[1] = running set; ARGV = member, ttl ms, placeholder.
var renewLimitScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREM', KEYS[1], ARGV[3])
return redis.call('ZADD', KEYS[1], 'XX', 'CH', now + tonumber(ARGV[2]), ARGV[1])
`)

// restoreLimitScript puts back the member of a claim MySQL says is still
// running (Redis lost it), in place of any placeholder.
// KEYS[1] = running set; ARGV = member, ttl ms, placeholder.
var restoreLimitScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREM', KEYS[1], ARGV[3])
return redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
`)

// rebuiltClaim is the claim ID of the members a rebuild adds: the reaper's
// clean-up of a dead attempt (which matches "<id>@<lease>#*") and the
// owner's watchdog and release find them by it.
const rebuiltClaim = "mysql"

// limitMember names one claim in a type's running set.
func limitMember(taskID int64, leaseValue, claimID string) string {
	return strconv.FormatInt(taskID, 10) + "@" + leaseValue + "#" + claimID
}

// rebuildLimit rebuilds the running set of r's type from MySQL's RUNNING
// rows after Redis lost it. Until each owner's watchdog puts its own
// member back, the set holds a placeholder per running task, lasting a
// LockTTL, so the limit counts them all in the meantime.
func (e *Executor) rebuildLimit(ctx context.Context, r *run) error {
	rows, err := e.store.RunningOfType(ctx, r.task.Type, 100000)
	if err != nil {
		return err
	}
	args := make([]any, 0, len(rows)+1)
	args = append(args, e.cfg.LockTTL.Milliseconds())
	for _, s := range rows {
		args = append(args, limitMember(s.ID, lease.Value(s.Executor, s.Attempt), rebuiltClaim))
	}
	n, err := rebuildLimitScript.Run(ctx, e.rdb, []string{r.limitKey, e.keys.RunningSetBuilt(r.task.Type)}, args...).Int()
	if err != nil {
		return fmt.Errorf("rebuild running set of %s: %w", r.task.Type, err)
	}
	if n == 1 {
		e.logger.Warn("running set lost with Redis; rebuilt from MySQL", "type", r.task.Type, "running", len(rows))
	}
	return nil
}

func (e *Executor) releaseLimit(r *run) {
	if r.limitKey == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.rdb.ZRem(ctx, r.limitKey, r.limitMember(), r.limitPlaceholder()).Err(); err != nil {
		e.logger.Warn("release concurrency slot failed; it expires by itself", "task_id", r.task.ID, "err", err)
	}
	select {
	case r.pool.room <- struct{}{}:
	default:
	}
}

// roomScript reports whether a type's running set has room for one more
// member, after evicting expired ones; a set not marked built counts as
// having room (the claim rebuilds it from MySQL first and then decides).
// KEYS[1] = running set, KEYS[2] = its built mark; ARGV[1] = limit.
var roomScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[2]) == 0 then
  return 1
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[1]) then
  return 1
end
return 0
`)

// hasRoom reports whether the type's running set has room under limit.
func (e *Executor) hasRoom(ctx context.Context, taskType string, limit int) (bool, error) {
	n, err := roomScript.Run(ctx, e.rdb, []string{e.keys.RunningSet(taskType), e.keys.RunningSetBuilt(taskType)}, limit).Int()
	if err != nil {
		return false, fmt.Errorf("room in the running set of %s: %w", taskType, err)
	}
	return n == 1, nil
}
