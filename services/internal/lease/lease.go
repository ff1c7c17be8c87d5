// Package lease is the execution lease of a task in Redis: the key
// keys.Lock(id) holding "<node>:<attempt>", the value of the claim that took
// it. Every change to a lease other than the first SET NX is a compare in
// Lua on that value, so nobody can renew, release or take over a lease
// that has meanwhile become another attempt's. The executor and the reaper
// share these scripts; MySQL, not the lease, decides who owns a task (the
// transfers are fenced by attempt), so a lease is only ever a hint that
// keeps two handlers of one task from running at once.
package lease

import (
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Value is the lease value of attempt on node.
func Value(node string, attempt int) string {
	return node + ":" + strconv.Itoa(attempt)
}

// Parse splits a lease value into its node and attempt; ok is false for a
// value that is not "<node>:<attempt>". Node names may hold colons: the
// attempt is what follows the last one.
func Parse(v string) (node string, attempt int, ok bool) {
	i := strings.LastIndexByte(v, ':')
	if i <= 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(v[i+1:])
	if err != nil {
		return "", 0, false
	}
	return v[:i], n, true
}

// Renew extends a lease only while it still holds the expected value.
// KEYS[1] = lease, ARGV[1] = expected value, ARGV[2] = ttl ms. Returns 1/0.
var Renew = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`)

// Release deletes a lease only while it still holds the expected value, so
// a newer attempt's lease is never touched.
// KEYS[1] = lease, ARGV[1] = expected value. Returns 1/0.
var Release = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

// TakeOver replaces a lease only while it still holds the value its
// taker judged dead, so of two claimants taking over the same dead lease
// one wins.
// KEYS[1] = lease, ARGV[1] = expected (dead) value, ARGV[2] = new value,
// ARGV[3] = ttl ms. Returns 1/0.
var TakeOver = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
`)

// Retake puts back a lease its holder lost with Redis (restart, FLUSHALL,
// failover) once MySQL confirmed the task is still its attempt's: it sets
// the lease when it is gone, renews it when it still holds the value, and
// leaves it alone when someone else holds it.
// KEYS[1] = lease, ARGV[1] = value, ARGV[2] = ttl ms. Returns 1 if held.
var Retake = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if not v then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
`)
