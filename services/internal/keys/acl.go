package keys

import "strings"

// ACLCommands are the Redis commands ax sends, directly or from its Lua
// scripts (EVAL/EVALSHA run them as the calling user, so they count too),
// plus what the client sends on connecting. Nothing else: no KEYS, no
// FLUSHALL, no CONFIG.
var ACLCommands = []string{
	// connection
	"hello", "auth", "ping", "select", "client|setname",
	// scripts (go-redis tries EVALSHA, then EVAL; SCRIPT LOAD warms them)
	"eval", "evalsha", "script|load",
	// strings and keys: locks, leases, the clock
	"get", "set", "del", "exists", "pexpire", "pttl", "time",
	// sorted sets: the timer's lanes, concurrency slots, dispatch marks
	"zadd", "zrem", "zcard", "zcount", "zrange", "zrangebyscore", "zremrangebyscore", "zscore", "zmscore", "zscan",
	// hashes: membership
	"hset", "hget", "hgetall", "hdel",
}

// ACLRules are the rules of a Redis ACL user for ax under k's prefix: keys
// under the prefix only, no Pub/Sub channel, and only ACLCommands. Give
// them to ACL SETUSER (or a users.acl line) after `on` and the password.
func (k Keys) ACLRules() []string {
	rules := []string{"~" + k.Prefix + ":*", "resetchannels", "-@all"}
	for _, c := range ACLCommands {
		rules = append(rules, "+"+c)
	}
	return rules
}

// ACLLine is ACLRules as one line, for users.acl or docs.
func (k Keys) ACLLine() string { return strings.Join(k.ACLRules(), " ") }
