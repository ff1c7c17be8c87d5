// Package timer decides when tasks are due.
//
// It consumes READY events and keeps one Redis sorted set per priority lane
// (score = next run time in Unix ms on the Redis clock, member = task ID).
// Its loop takes due IDs atomically with a Lua script that reads Redis TIME
// itself, lane by lane in priority order. A due READY task indexed with its
// type and attempt is dispatched at once to its executors, a lean dispatch
// under the dispatcher's rule applied directly (direct dispatch, see
// package dispatch); a due RETRYING task is first moved to READY, all
// of a pass's in one transaction fenced on the indexed attempt and due
// time, and dispatched the same way. Only an entry of an older timer (a
// bare ID), or a backoff whose transaction failed, gets a TaskDue command
// for the dispatcher. The loop sleeps until the earliest remaining score plus a
// coalescing window of 2 ms (computed from Redis values only, so local clock
// skew cannot make it early; the window makes one pop take every task due
// within it instead of one wake-up per task at high rates) or the
// configured interval, whichever is sooner, and a READY event for an earlier
// task wakes it at once.
//
// Redis is only a hint: when the generation key is missing (restart,
// FLUSHALL, failover) the index is rebuilt from MySQL's READY tasks, and a
// reconciler periodically re-indexes READY tasks that have waited longer
// than a grace period without being dispatched, so a lost event or command
// delays a task but never loses it.
//
// # Replicas
//
// Any number of timers may run, with no leader. All state is in Redis and
// MySQL; a replica keeps only when it plans to wake.
//
//   - Events: the durable consumers timer, timer_retrying and timer_types
//     are shared by all replicas, so JetStream hands each event to one of
//     them. Indexing is a ZADD into the shared lanes, idempotent, so an event
//     delivered twice rewrites the same member with the same score.
//   - Pop: the pop script reads Redis TIME, takes the due IDs and removes
//     them (ZREM) in one script, and Redis runs one script at a time, so each
//     indexed ID is returned to exactly one replica: this is the atomic
//     claim. IDs popped but not published (NATS down) are gone from Redis;
//     the reconciler finds them in MySQL.
//   - Rebuild: when the generation key is missing, replicas race SET NX on
//     it and only the winner rebuilds; the others retry their pop every 50 ms
//     and meanwhile pop from the partly rebuilt lanes, which only delays the
//     tasks not yet re-added.
//   - Reconciler: every replica runs it, on the same stale READY tasks. A
//     task it re-indexes after it was popped (its due command may only be
//     queued behind a backlog, not lost) is popped again and gets a second
//     due command.
//
// So the timer guarantees at least one dispatch or TaskDue per indexed
// task, not exactly one. Exactly-once is enforced downstream by the
// database: an executor runs a task only after its lease (SET NX) and its
// READY -> RUNNING transfer fenced by the dispatched attempt and due time
// both succeed (and the RETRYING -> READY move, the timer's or the
// dispatcher's, is fenced the same way), so a duplicate ends as a lost
// claim, never as a second run.
//
// # Schedules
//
// Every replica also fires schedules (schedule.go), with no leader either:
// when the earliest next fire time comes on the scheduler clock (read
// first: a pass with nothing due opens no transaction) it runs up to
// ScheduleWorkers transactions (store.FireDue), each locking a batch of
// due schedules with SKIP LOCKED so that replicas share them, recording
// each (schedule, fire time) in schedule_fires, creating the tasks and
// advancing the schedules. The primary key of schedule_fires is the rule:
// a fire time has exactly one task whichever replica fires it, and a task
// planned for a fire time that has a row already is not written. Fire
// times are never fired before the scheduler clock reaches them; missed
// ones (found later than ScheduleGrace) follow the schedule's catch-up
// policy. A replica keeps no schedule state, so a killed one leaves each
// schedule as its last commit did.
package timer
