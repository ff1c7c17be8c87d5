// Package reaper recovers the work of dead, departed and hung executors, so
// that no task stays RUNNING when nobody is running it.
//
// Every Interval (1 s by default) one pass runs three sweeps, in this order:
//
//  1. Dead nodes (RecoverDeadNodes). An executor that missed three
//     membership heartbeats (see package membership) is dead: its RUNNING
//     tasks whose heartbeat in MySQL stopped too (older than the executors'
//     RenewInterval plus a second; the registry only suggests) go back to
//     READY at once, their leases and cluster-limit slots removed first, so
//     recovery takes a heartbeat timeout plus one pass instead of a whole
//     lease. A dead node is forgotten from the registry
//     twenty heartbeats later.
//  2. Orphans (RepairOrphans), the catch-all. A RUNNING task whose executor
//     is not alive in the registry (never registered, left, forgotten) and
//     whose lease is gone from Redis cannot be finished by anybody: once it
//     has looked so for OrphanAfter (two heartbeat intervals) it goes back to
//     READY. The sweep pages through all such tasks, and
//     ax_reaper_stuck_running reports how many the last sweep found. A
//     draining executor has left the registry but still holds the leases of
//     the tasks it is finishing, so they are left alone.
//  3. Silent tasks (RunOnce). RUNNING tasks whose heartbeat in MySQL is
//     older than Silence (judged on the database clock). One past its
//     timeout plus TimeoutGrace is recorded TIMEOUT through the shared retry
//     policy (RETRYING with backoff, or a dead letter) and its stale lease
//     removed: the scheduler side of the two-level timeout. One whose Redis
//     lease still exists belongs to a live (or briefly stalled) executor and
//     is left alone. Any other lost its lease: RUNNING -> READY, so it runs
//     elsewhere. A crash therefore costs at most one duplicate run.
//
// Every 5 s, a fourth sweep (SettleSuspended) settles SUSPEND tasks whose
// parents have all ended according to their rows but which nothing
// released or cancelled; the parents' own final transfers normally do it
// in their transaction, so this only catches what slipped, each child in a
// transaction that locks it and checks it is still SUSPEND.
//
// Every change is a transfer fenced by the attempt the sweep saw (UPDATE ...
// WHERE status = 'RUNNING' AND attempt = ?), with its history row and event
// in the same transaction, and its history reason names the sweep: "executor
// X is dead", "orphaned: executor X is not alive ...", "lease expired" or
// "timed out by the reaper".
//
// # Replicas
//
// Any number of reapers may run, with no leader and no coordination. Each
// replica reads the same candidates with plain SELECTs; the fenced transfer
// is the atomic claim. When two replicas race for one task, exactly one
// UPDATE matches the row and commits the history row and the event; the
// other gets a *store.ConflictError, which it ignores. The Redis clean-up
// done before a transfer is safe to repeat and cannot hurt a newer attempt:
// the lease is deleted only while it still holds the old attempt's value
// "<node>:<attempt>" (compare-and-delete in Lua), and only the old attempt's
// members of the type's running set are removed. Forgetting a dead node is
// an HDEL, idempotent too. The only state a replica keeps is, in memory,
// the orphans it is waiting on; a restarted replica starts the wait again.
// Replicas multiply the reads, not the writes; each replica counts only the
// transfers it won, so sum the counters across replicas and take the max of
// the gauge.
//
// # Retention
//
// RunRetention, a loop of its own beside the sweeps (a long prune never
// delays recovery), deletes finished tasks past their state's retention
// with their history and dead letters (see RetentionConfig and
// store.PruneFinished). Unlike the sweeps it is fenced: one reaper at a
// time holds the Redis lease keys.RetentionLease, taken with SET NX and
// renewed after every batch; a reaper that lost it stops its pass. The
// lease only saves work: every delete re-checks the state and end time of
// rows it has locked, so two reapers pruning at once delete nothing twice
// and nothing alive.
package reaper
