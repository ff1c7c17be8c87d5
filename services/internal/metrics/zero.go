package metrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/axsched/ax/contracts"
)

// The hops of ax_task_hop_seconds.
const (
	HopSend    = "commit_to_send"
	HopStore   = "send_to_stored"
	HopFetch   = "stored_to_fetch"
	HopClaim   = "fetch_to_claim"
	HopStart   = "claim_to_start"
	HopOutcome = "end_to_outcome"
)

// Label values known in advance. A labelled series appears on /metrics
// only once it is first touched, so without this a dashboard or an alert
// (rate over a counter that jumps from absent to 1, "no failures" versus
// "no data") could not tell a quiet system from a broken scrape.
var (
	// RunOutcomes are the values of ax_executor_runs_total's outcome label.
	RunOutcomes = []string{"success", "failed", "timeout", "failed_silent", "timeout_silent", "returned", "cancelled"}
	// SkipReasons are the values of ax_dispatcher_skipped_total's reason.
	SkipReasons = []string{"undecodable", "not_found", "duplicate", "not_ready", "not_due", "paused"}
	// ScheduleOutcomes are the values of ax_schedule_fires_total's outcome.
	ScheduleOutcomes = []string{"fired", "overlapped", "missed", "lost", "refused"}
	// Hops are the values of ax_task_hop_seconds's hop label, in a task's
	// order: READY transfer written -> taken up by its sender (the relay's
	// read, or the submitter's commit) -> dispatch stored by JetStream ->
	// fetched by the executor -> claim committed -> handler started, and
	// handler ended -> outcome committed.
	Hops = []string{HopSend, HopStore, HopFetch, HopClaim, HopStart, HopOutcome}
	// ExecutorStates are the values of ax_cluster_executors's state.
	ExecutorStates = []string{"alive", "dead"}
	// RolloutSides are the values of the rollout metrics' side label.
	RolloutSides = []string{"canary", "stable"}
	// prunedStatuses are the states retention deletes.
	prunedStatuses = []contracts.Status{contracts.StatusSuccess, contracts.StatusCancelled, contracts.StatusFailed, contracts.StatusTimeout}
)

// init creates every series whose label values do not depend on the task
// types, at zero, so each process shows them from its start.
func init() {
	for _, s := range contracts.Statuses {
		Transfers.WithLabelValues(string(s))
		TransferConflicts.WithLabelValues(string(s))
	}
	for _, p := range contracts.Priorities {
		TimerDue.WithLabelValues(string(p))
		TimerBacklogTasks.WithLabelValues(string(p))
		TimerBacklogAge.WithLabelValues(string(p))
	}
	for _, r := range SkipReasons {
		DispatchSkipped.WithLabelValues(r)
	}
	for _, s := range prunedStatuses {
		RetentionPruned.WithLabelValues(string(s))
	}
	for _, o := range ScheduleOutcomes {
		ScheduleFires.WithLabelValues(o)
	}
	for _, h := range Hops {
		TaskHopSeconds.WithLabelValues(h)
	}
	for _, s := range ExecutorStates {
		ClusterExecutors.WithLabelValues(s)
	}
}

// InitType creates the per-type series of a task type at zero. Processes
// call it for every type they learn of (an executor for the types it
// serves, a submitter for the registered types), so a type's rates and
// histograms exist before its first task; calling it again is harmless.
func InitType(name string) {
	for _, dedup := range []bool{false, true} {
		TasksSubmitted.WithLabelValues(name, strconv.FormatBool(dedup))
	}
	for _, o := range RunOutcomes {
		ExecutorRuns.WithLabelValues(name, o)
	}
	ExecutorRunSeconds.WithLabelValues(name)
	ExecutorActive.WithLabelValues(name)
	ExecutorRejections.WithLabelValues(name)
	ExecutorClaimsLost.WithLabelValues(name)
	ExecutorReleasedHere.WithLabelValues(name)
	ExecutorQueueLength.WithLabelValues(name)
	Dispatched.WithLabelValues(name)
	DispatchedLean.WithLabelValues(name)
	ReaperTimedOut.WithLabelValues(name)
	initRollout(name)
}

// initRollout creates a type's rollout series at zero: a type that never
// had a rollout reads 0 %, no runs, no rollback.
func initRollout(name string) {
	RolloutPercent.WithLabelValues(name)
	for _, side := range RolloutSides {
		RolloutRouted.WithLabelValues(name, side)
		RolloutFallbacks.WithLabelValues(name, side)
		RolloutRuns.WithLabelValues(name, side)
		RolloutFailureRate.WithLabelValues(name, side)
		RolloutTimeoutRate.WithLabelValues(name, side)
		RolloutP99Seconds.WithLabelValues(name, side)
	}
	for _, t := range []string{"guard", "manual"} {
		RolloutRollbacks.WithLabelValues(name, t)
	}
	for _, a := range []string{"advance", "promote"} {
		RolloutSteps.WithLabelValues(name, a)
	}
}

// Observed is how many observations a histogram holds and their sum:
// what tests read to see that work was measured.
func Observed(h prometheus.Histogram) (count uint64, sum float64) {
	var m dto.Metric
	if err := h.Write(&m); err != nil {
		return 0, 0
	}
	return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
}
