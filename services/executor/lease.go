package executor

import "github.com/redis/go-redis/v9"

// renewScript extends a lock only while it still holds this attempt's value,
// so a node can never renew a lease another node has taken over.
// KEYS[1] = lock, ARGV[1] = expected value, ARGV[2] = ttl ms. Returns 1/0.
var renewScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// releaseScript deletes a lock only if it still holds this attempt's value.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)
