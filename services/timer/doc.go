// Package timer decides when tasks are due.
//
// It consumes READY events and keeps one Redis sorted set per priority lane
// (score = next run time in Unix ms on the Redis clock, member = task ID).
// Its loop takes due IDs atomically with a Lua script that reads Redis TIME
// itself, lane by lane in priority order, and publishes a TaskDue command
// for each. The loop sleeps until the earliest remaining score (computed
// from Redis values only, so local clock skew cannot make it early) or the
// configured interval, whichever is sooner, and a READY event for an earlier
// task wakes it at once.
//
// Replicas: any number of timers may run. The pop script removes what it
// returns, so each due ID is taken by exactly one replica; only the replica
// that wins SET NX on the generation key rebuilds a lost index.
//
// Redis is only a hint: when the generation key is missing (restart,
// FLUSHALL, failover) the index is rebuilt from MySQL's READY tasks, and a
// reconciler periodically re-indexes READY tasks that have waited longer
// than a grace period without being dispatched, so a lost event or command
// delays a task but never loses it.
package timer
