// Package metrics declares every Prometheus metric ax exports, so names live
// in one place. All metrics register on the default registry, which /metrics
// serves.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
)

var (
	// TasksSubmitted counts accepted submissions by type and whether they
	// were deduplicated.
	TasksSubmitted = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_tasks_submitted_total", Help: "Tasks accepted by the submitter.",
	}, []string{"type", "deduplicated"})
	// SubmitCommits counts the submitter's transactions of single
	// submissions and of workflow creations: concurrent ones share one
	// (group commit), so under load it grows much more slowly than they do.
	SubmitCommits = promauto.NewCounter(prometheus.CounterOpts{
		Name: "ax_submitter_commits_total", Help: "Transactions that committed single submissions or workflow creations (several share one under load).",
	})
	// Transfers counts committed state transfers by target state.
	Transfers = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_transfers_total", Help: "Committed task state transfers by target state.",
	}, []string{"to"})
	// TransferConflicts counts transfers that lost their compare-and-set.
	TransferConflicts = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_transfer_conflicts_total", Help: "Transfers refused because the task moved first or the attempt was stale.",
	}, []string{"to"})
	// OutboxRelayed counts events moved from the outbox to JetStream.
	OutboxRelayed = promauto.NewCounter(prometheus.CounterOpts{
		Name: "ax_outbox_relayed_total", Help: "Events published to JetStream by the relay (from task history and the outbox).",
	})
	// EventMessages counts the messages the relay published to
	// AX_EVENTS: the transfers of one pass on one subject share one
	// (OutboxRelayed counts the events).
	EventMessages = promauto.NewCounter(prometheus.CounterOpts{
		Name: "ax_event_messages_total", Help: "Messages the relay published to JetStream; the transfers of one pass on one subject share one (ax_outbox_relayed_total counts the events).",
	})
	// OutboxErrors counts failed relay passes.
	OutboxErrors = promauto.NewCounter(prometheus.CounterOpts{
		Name: "ax_outbox_relay_errors_total", Help: "Relay passes that failed and will be retried.",
	})
	// TimerIndexed counts READY tasks added to the timer's sorted sets.
	TimerIndexed = promauto.NewCounter(prometheus.CounterOpts{
		Name: "ax_timer_indexed_total", Help: "READY tasks indexed into the due-time sorted sets.",
	})
	// TimerSkipped counts READY events of tasks due at once that reached
	// the timer: only a relay of an older version publishes them on the
	// timer's subject (events.SubjectReadyNow).
	TimerSkipped = promauto.NewCounter(prometheus.CounterOpts{
		Name: "ax_timer_skipped_total", Help: "READY events of tasks due at once passed over by the timer (published on its subject by a relay of an older version).",
	})
	// TimerDue counts tasks the timer found due, by lane.
	TimerDue = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_timer_due_total", Help: "Tasks taken from the sorted sets as due, by lane.",
	}, []string{"lane"})
	// ScheduleFires counts a schedule's fire times by what became of them:
	// fired (a task), overlapped (passed over while the previous fire's
	// task ran), missed (passed over by the catch-up policy), lost (the
	// fire time had a fire already: the unique key kept the first) and
	// refused (no task could be made: the template's type is gone).
	ScheduleFires = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_schedule_fires_total", Help: "Schedule fire times handled by this timer, by outcome.",
	}, []string{"outcome"})
	// ScheduleLateness measures how long after its fire time a fire's task
	// was created (never negative: schedules never fire early).
	ScheduleLateness = promauto.NewHistogram(prometheus.HistogramOpts{
		Name: "ax_schedule_fire_lateness_seconds", Help: "Time from a schedule's fire time to the commit of its task.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
	})
	// TimerRebuilds counts rebuilds of the Redis index from MySQL.
	TimerRebuilds = promauto.NewCounter(prometheus.CounterOpts{
		Name: "ax_timer_rebuilds_total", Help: "Rebuilds of the Redis due-time index from MySQL.",
	})
	// TimerReconciled counts READY tasks re-driven by the reconciler.
	TimerReconciled = promauto.NewCounter(prometheus.CounterOpts{
		Name: "ax_timer_reconciled_total", Help: "Stale READY tasks re-indexed by the reconciler.",
	})
	// ClockSkew is local clock minus Redis TIME, in seconds.
	ClockSkew = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "ax_clock_skew_seconds", Help: "Local clock minus the Redis TIME clock.",
	})
	// Dispatched counts tasks handed to executors, by type, by the
	// dispatcher, the relay (tasks due at once) or the timer (READY tasks
	// that fall due).
	Dispatched = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_dispatcher_dispatched_total", Help: "Tasks published to executor subjects (by the dispatcher, by the relay for tasks due at once, by the timer for READY tasks that fall due).",
	}, []string{"type"})
	// DispatchedLean counts the dispatches among them that went out lean,
	// without a read of the task row (events.TaskDispatched.Load), by type.
	DispatchedLean = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_dispatcher_lean_total", Help: "Tasks dispatched without reading the task row (the executor's claim checks it).",
	}, []string{"type"})
	// DispatchSkipped counts due commands dropped after the MySQL re-check.
	DispatchSkipped = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_dispatcher_skipped_total", Help: "Due commands dropped after re-checking MySQL.",
	}, []string{"reason"})
	// ExecutorRuns counts handler runs by type and outcome.
	ExecutorRuns = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_executor_runs_total", Help: "Handler runs by type and outcome.",
	}, []string{"type", "outcome"})
	// ExecutorRunSeconds measures handler run time.
	ExecutorRunSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name: "ax_executor_run_seconds", Help: "Handler run time.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	}, []string{"type"})
	// ExecutorClaimsLost counts dispatched tasks another claimant got first.
	ExecutorClaimsLost = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_executor_claims_lost_total", Help: "Claims given up because the lock or the attempt was taken.",
	}, []string{"type"})
	// ExecutorReleasedHere counts children an executor's outcomes released
	// that it started itself, without a dispatch message: it owned their
	// shards (executor.Config.SendReleased).
	ExecutorReleasedHere = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_executor_released_here_total", Help: "Released children this executor took up itself, without a dispatch message, owning their shards.",
	}, []string{"type"})
	// ExecutorRejections counts claims that found their type's cluster-wide
	// pool full after all (another executor took the room first); the task
	// stays in its lane, unclaimed.
	ExecutorRejections = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_executor_rejections_total", Help: "Claims that found their type's cluster-wide pool full; the task stays in its lane.",
	}, []string{"type"})
	// ExecutorActive is the number of handlers running now.
	ExecutorActive = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ax_executor_active_workers", Help: "Handlers running now.",
	}, []string{"type"})
	// LeasesLost counts running tasks whose lock renewal failed.
	LeasesLost = promauto.NewCounter(prometheus.CounterOpts{
		Name: "ax_executor_leases_lost_total", Help: "Running tasks cancelled because their lock was lost.",
	})
	// ReaperTimedOut counts silent RUNNING tasks past timeout plus grace,
	// by type: with ax_executor_runs_total{outcome=~"timeout.*"} they are
	// every timeout of the type.
	ReaperTimedOut = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_reaper_timed_out_total", Help: "Silent RUNNING tasks past their timeout recorded TIMEOUT by the reaper, by type.",
	}, []string{"type"})
	// ReaperRecovered counts RUNNING tasks returned to READY.
	ReaperRecovered = promauto.NewCounter(prometheus.CounterOpts{
		Name: "ax_reaper_recovered_total", Help: "RUNNING tasks of silent executors returned to READY.",
	})
	// ReaperStuckRunning is how many orphaned RUNNING tasks (no live owner
	// in the membership registry, no lease in Redis) the last orphan sweep
	// found. It drops back to 0 on the next pass when repairs succeed; a
	// value that stays up means tasks keep getting orphaned or cannot be
	// repaired.
	ReaperStuckRunning = promauto.NewGauge(prometheus.GaugeOpts{
		Name: "ax_reaper_stuck_running", Help: "RUNNING tasks with no live owner and no lease found by the reaper's last orphan sweep.",
	})
	// ReaperStuckRepaired counts orphaned RUNNING tasks returned to READY.
	ReaperStuckRepaired = promauto.NewCounter(prometheus.CounterOpts{
		Name: "ax_reaper_stuck_repaired_total", Help: "Orphaned RUNNING tasks (no live owner, no lease) returned to READY by the reaper.",
	})
	// IdempotencyKeysPruned counts idempotency keys deleted past retention.
	IdempotencyKeysPruned = promauto.NewCounter(prometheus.CounterOpts{
		Name: "ax_idempotency_keys_pruned_total", Help: "Idempotency keys deleted by the reaper because they were older than --idempotency-retention.",
	})
	// RetentionPruned counts finished tasks deleted past their state's
	// retention, with their history and dead letters.
	RetentionPruned = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_retention_pruned_total", Help: "Finished tasks deleted (with their history and dead letters) by the reaper because they ended longer ago than their state's retention (--retain-*).",
	}, []string{"status"})
	// ReaperStrandedMoved counts task messages moved off the subjects of
	// executor nodes that are gone, back to the dispatcher.
	ReaperStrandedMoved = promauto.NewCounter(prometheus.CounterOpts{
		Name: "ax_reaper_stranded_moved_total", Help: "Task messages moved off departed executor nodes' subjects back to the dispatcher.",
	})

	// TimerLoopDelay is how late the timer took each due task: the pop's
	// Redis time minus the task's due time. It grows when the timer falls
	// behind (a slow Redis, a full pass of Batch tasks, a stopped loop).
	TimerLoopDelay = promauto.NewHistogram(prometheus.HistogramOpts{
		Name: "ax_timer_loop_delay_seconds", Help: "How long past its due time the timer took a task from the sorted sets (Redis clock).",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	})
	// TimerBacklogTasks is how many tasks of each lane are due now and
	// not taken yet, sampled by every timer from the shared sorted sets.
	TimerBacklogTasks = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ax_timer_backlog_tasks", Help: "Tasks due now and still waiting in the timer's sorted set of the lane (sampled every 5 s).",
	}, []string{"lane"})
	// TimerBacklogAge is how long the oldest due task of each lane has
	// been due (0 when none is): a backlog that ages is one nothing takes.
	TimerBacklogAge = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ax_timer_backlog_age_seconds", Help: "How long the oldest task due in the lane's sorted set has been due, 0 when none is (sampled every 5 s).",
	}, []string{"lane"})
	// RelayLag is, per published event, the publish time minus the time
	// its row was written (task_history or outbox created_at, MySQL clock).
	RelayLag = promauto.NewHistogram(prometheus.HistogramOpts{
		Name: "ax_relay_lag_seconds", Help: "Time from writing an event's row in MySQL to JetStream acknowledging its publish.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10),
	})
	// TaskHopSeconds times, per attempt of a task due at once, the hops
	// from its READY transfer to its handler and from its handler to its
	// outcome (Hops names them), observed by the executor that ran it.
	// Hops timed on two processes' clocks (or on MySQL's) read a clock
	// ahead as 0, not as negative.
	TaskHopSeconds = promauto.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "ax_task_hop_seconds",
		Help:    "Per attempt, the time a task spent on each hop from its READY transfer to its handler, and from its handler to its outcome.",
		Buckets: []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1, 2.5},
	}, []string{"hop"})
	// ExecutorQueueLength is the work waiting for this executor per type:
	// messages on its own subjects not yet claimed (pending or held) plus
	// those pending on the type's shared subjects, sampled from JetStream
	// every heartbeat.
	ExecutorQueueLength = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ax_executor_queue_length", Help: "Task messages waiting for this executor, by type: its own subjects' unclaimed ones plus the shared subjects' pending (sampled every heartbeat).",
	}, []string{"type"})
	// DispatchMessages counts the messages that carried dispatches to
	// executor subjects: the tasks of one send bound for one subject share
	// one (Dispatched counts the tasks).
	DispatchMessages = promauto.NewCounter(prometheus.CounterOpts{
		Name: "ax_dispatch_messages_total", Help: "Messages published to executor subjects; the tasks of one send bound for one subject share one (ax_dispatcher_dispatched_total counts the tasks).",
	})
	// PullRenewals counts pull requests a consumer renewed because it
	// heard nothing, not even an idle heartbeat, for two heartbeat
	// intervals: a pull the client library counted open that the server
	// no longer held (each a stall of up to a second while work waited),
	// a lost connection, or a process too starved to read its messages.
	PullRenewals = promauto.NewCounter(prometheus.CounterOpts{
		Name: "ax_pull_renewals_total", Help: "Pull requests renewed after two idle heartbeat intervals without a message (a lost pull: each stalled its consumer up to a second).",
	})
	// ExecutorHeartbeatFailures counts membership heartbeats that could
	// not be written; three in a row make the node look dead.
	ExecutorHeartbeatFailures = promauto.NewCounter(prometheus.CounterOpts{
		Name: "ax_executor_heartbeat_failures_total", Help: "Membership heartbeats the executor failed to write (three missed make it dead).",
	})
	// ClusterExecutors counts registered executors by state (alive, dead)
	// as the reaper last read the membership registry.
	ClusterExecutors = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ax_cluster_executors", Help: "Executors in the membership registry by state (alive: heartbeat within three intervals), as the reaper last read it.",
	}, []string{"state"})
	// ClusterTypeExecutors counts live executors serving each known type
	// (registered in MySQL or served by a registered node), 0 when none.
	ClusterTypeExecutors = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ax_cluster_type_executors", Help: "Live executors serving the task type, 0 for a known type nobody serves (reaper's view).",
	}, []string{"type"})
	// ClusterShardsOwned is how many shards of a type's ring each live
	// node owns: the shard load of the dispatcher's routing.
	ClusterShardsOwned = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ax_cluster_shards_owned", Help: "Shards of the task type's consistent hash ring owned by the live node (reaper's view).",
	}, []string{"node", "type"})

	// ReaperSuspendedSettled counts SUSPEND tasks the reaper released or
	// cancelled because their parents had all ended and nothing had
	// settled them: each is a release the parents' own transfers missed.
	ReaperSuspendedSettled = promauto.NewCounter(prometheus.CounterOpts{
		Name: "ax_reaper_suspended_settled_total", Help: "SUSPEND tasks whose parents had all ended, settled by the reaper's reconciler instead of the parents' final transfers.",
	})

	// RolloutRouted counts dispatches of types in rollout by the side
	// (canary or stable) their version put them on.
	RolloutRouted = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_rollout_routed_total", Help: "Dispatches of a type in rollout by side (canary, stable).",
	}, []string{"type", "side"})
	// RolloutFallbacks counts tasks sent to the other side because theirs
	// had no live executor past the grace.
	RolloutFallbacks = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_rollout_fallbacks_total", Help: "Tasks of a type in rollout sent to the other side because the side they were meant for (label) had no live executor past the grace.",
	}, []string{"type", "side"})
	// RolloutPercent is the share of new tasks the canary gets.
	RolloutPercent = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ax_rollout_percent", Help: "Percent of the type's new tasks routed to its rollout's canary version, published by the reaper guarding rollouts (0 after a rollback, 100 once promoted).",
	}, []string{"type"})
	// RolloutRuns, RolloutFailureRate, RolloutTimeoutRate and
	// RolloutP99Seconds are what the guard last saw over its window.
	RolloutRuns = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ax_rollout_window_runs", Help: "Finished runs in the guard's window by side (canary, stable).",
	}, []string{"type", "side"})
	RolloutFailureRate = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ax_rollout_failure_rate", Help: "Failed runs over runs in the guard's window by side.",
	}, []string{"type", "side"})
	RolloutTimeoutRate = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ax_rollout_timeout_rate", Help: "Timed-out runs over runs in the guard's window by side.",
	}, []string{"type", "side"})
	RolloutP99Seconds = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Name: "ax_rollout_p99_seconds", Help: "p99 run time in the guard's window by side.",
	}, []string{"type", "side"})
	// RolloutRollbacks counts rollbacks, automatic (guard breach) or manual.
	RolloutRollbacks = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_rollout_rollbacks_total", Help: "Rollouts rolled back, by trigger: guard (automatic, on a breach) or manual.",
	}, []string{"type", "trigger"})
	// RolloutSteps counts guard advances and promotions.
	RolloutSteps = promauto.NewCounterVec(prometheus.CounterOpts{
		Name: "ax_rollout_steps_total", Help: "Rollout moves up a step or to 100 % (action: advance, promote), automatic or manual.",
	}, []string{"type", "action"})
)
