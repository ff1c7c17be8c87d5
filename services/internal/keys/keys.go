// Package keys builds every Redis key ax uses. Keys that one Lua script
// touches together share the {sched} hash tag so the script also works on
// Redis Cluster.
package keys

import (
	"strconv"

	"github.com/axsched/ax/contracts"
)

// Keys builds keys under one prefix (default "ax"); tests use a prefix each.
type Keys struct {
	Prefix string
}

// New returns key builders for prefix, "ax" when empty.
func New(prefix string) Keys {
	if prefix == "" {
		prefix = "ax"
	}
	return Keys{Prefix: prefix}
}

// Lane is the sorted set of due times of one priority lane
// (score = next run time in Unix ms, member = task ID).
func (k Keys) Lane(p contracts.Priority) string { return k.Prefix + ":{sched}:lane:" + string(p) }

// Lanes lists the lane keys in serve order.
func (k Keys) Lanes() []string {
	out := make([]string, len(contracts.Priorities))
	for i, p := range contracts.Priorities {
		out[i] = k.Lane(p)
	}
	return out
}

// Generation marks the index as built; its absence means Redis lost the
// index (restart, FLUSHALL, failover) and the timer must rebuild it.
func (k Keys) Generation() string { return k.Prefix + ":{sched}:gen" }

// Dispatched is a sorted set of task IDs scored by when the dispatcher last
// handed them to executors (scheduler clock, Unix ms). It is a hint for the
// reconciler, which leaves recently dispatched tasks alone; losing it only
// makes the reconciler re-drive waiting tasks early, which fencing absorbs.
func (k Keys) Dispatched() string { return k.Prefix + ":{sched}:dispatched" }

// Lock is a task's execution lease, holding "<node>:<attempt>".
func (k Keys) Lock(taskID int64) string {
	return k.Prefix + ":lock:task:" + strconv.FormatInt(taskID, 10)
}

// RunningSet holds the task IDs of a type currently RUNNING anywhere in the
// cluster (score = lease expiry in Unix ms), enforcing the type's
// cluster-wide concurrency limit.
func (k Keys) RunningSet(taskType string) string {
	return k.Prefix + ":{type:" + taskType + "}:running"
}

// RunningSetBuilt marks a type's running set as complete. Its absence
// means Redis lost the set (restart, FLUSHALL, failover): the next claim
// of the type rebuilds it from MySQL's RUNNING rows before it counts.
func (k Keys) RunningSetBuilt(taskType string) string {
	return k.Prefix + ":{type:" + taskType + "}:running:built"
}

// Nodes is the executor membership registry: a hash of node name to its
// last heartbeat (JSON). Losing it is harmless: executors re-register on
// their next heartbeat.
func (k Keys) Nodes() string { return k.Prefix + ":nodes" }

// RetentionLease names the reaper that prunes finished tasks, holding
// "<node>/<random>" with an expiry: one reaper prunes at a time.
func (k Keys) RetentionLease() string { return k.Prefix + ":reaper:retention" }

// RolloutLease names the reaper whose guard drives the rollouts, holding
// its holder name with an expiry: one guard at a time.
func (k Keys) RolloutLease() string { return k.Prefix + ":reaper:rollout" }
