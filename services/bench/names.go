package bench

import "slices"

// Workload names: the four standard workloads ax's benchmark targets are
// set for (docs/benchmarks.md).
const (
	Throughput = "throughput"
	Latency    = "latency"
	Delayed    = "delayed"
	Retry      = "retry"
	// Retention is not a standard workload and runs only when asked for: it
	// seeds a million finished tasks and runs ax twice.
	Retention = "retention"
	// Schedules is not a standard workload either: a thousand schedules
	// firing every second, for the timer's fire lateness.
	Schedules = "schedules"
	// Chains is not a standard workload either: two-step workflows in an
	// open loop, for the release latency and chains per second, and the
	// lineage of a 1,000-step workflow.
	Chains = "chains"
	// Find is not a standard workload either: it seeds a million tasks and
	// times GET /v1/tasks and GET /v1/stats on them.
	Find = "find"
)

// AllWorkloads lists the standard workloads in the order they run.
var AllWorkloads = []string{Throughput, Latency, Delayed, Retry}

// KnownWorkloads are every workload --workload accepts, in run order.
var KnownWorkloads = append(slices.Clone(AllWorkloads), Retention, Schedules, Chains, Find)

// Metric names, as docs/benchmarks.md reports them and says how each is
// measured; they stay fixed so figures compare across builds.
const (
	mE2ETPS     = "e2e_tps"
	mEnqueueTPS = "enqueue_tps"
	mProcessTPS = "process_tps"
	mDrain      = "drain_s"
	mLatency    = "latency" // latency_p50_ms ... latency_max_ms
	mDelayed    = "delayed" // delayed_p50_ms ... delayed_max_ms
	mEarly      = "early_count"
	mRetryTotal = "retry_total_s"
	mRetryGap   = "retry_gap" // retry_gap_p50_ms ...: failed attempt's end to the retry's start
	mSubmitCall = "submit"    // submit_p50_ms ...: one HTTP submission, call to answer
	mSubmitLag  = "submit_lag_max_ms"
	mAchieved   = "achieved_rate"
	// mTasksPerS (latency): tasks finished / (first submit → last handler
	// end), the chains workload's chains_per_s for single tasks.
	mTasksPerS = "tasks_per_s"
	mTasks     = "tasks"
	mRuns      = "runs"
	mWindow    = "window_s"
	prefixCPU  = "cpu_s."
	prefixRSS  = "peak_rss_mb."
	// prefixCPUPerTask is CPU milliseconds per task, per process.
	prefixCPUPerTask = "cpu_ms_per_task."
	cpuTotalName     = "total"
	harnessName      = "harness"

	// Counters that must stay zero (reported as the worst rep).
	mMissing        = "missing"
	mDuplicates     = "duplicates"
	mDropped        = "dropped"
	mSubmitErrors   = "submit_errors"
	mRanWhilePaused = "ran_while_paused"

	// The chains workload.
	mRelease = "release" // release_p50_ms ...: parent's end to the child's start
	// release_commit_p50_ms ...: parent's end to the commit of the
	// transaction that released the child (as its dispatch says)
	mReleaseCommit = "release_commit"
	mChain         = "chain" // chain_p50_ms ...: submission to the child's end
	mChainsPerS    = "chains_per_s"
	// mChainsVsSingle: chains_per_s as a share of the latency workload's
	// tasks_per_s in the same rep, median over the reps (chainsShare).
	mChainsVsSingle = "chains_vs_single_pct"
	// mChainsVsSingleEqualSpeed: each rep's share as it would be had both
	// workloads run at the same machine speed, median over the reps
	// (equalSpeedShares).
	mChainsVsSingleEqualSpeed = "chains_vs_single_pct_equal_speed"
	mLineage                  = "lineage_1000" // lineage_1000_p50_ms ...: GET lineage of a 1,000-step workflow
)
