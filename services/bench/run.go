package bench

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
)

// run is one run of one workload against one target.
type run struct {
	cfg    *Config
	logger *slog.Logger
	target *target
	api    *client.Client
	db     *sql.DB
	col    *collector
	meter  *costMeter
}

// Run runs every workload of cfg Reps times and returns one Result per
// workload (two, A and B, in a comparison: Config.Compare). Each rep runs
// every workload once, in turn, so that a machine that slows down or speeds
// up during the run moves every workload alike (and a rep's latency and
// chains runs can be set against each other: chains_vs_single_pct); in a
// comparison each workload runs as both sides before the next one starts,
// in ABBA order. A run whose tasks did not all finish still reports what
// it measured; the error then says what went wrong.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var workloads []string
	for _, w := range KnownWorkloads {
		if slices.Contains(cfg.Workloads, w) {
			workloads = append(workloads, w)
		}
	}
	reps := map[string]map[int][]Metric{} // by workload and side, then rep
	var errs []error
reps:
	for rep := 1; rep <= cfg.Reps; rep++ {
		this := map[string][]Metric{}
		for _, w := range workloads {
			for _, side := range cfg.sidesAt(rep) {
				sc := cfg.sideConfig(side)
				sc.Logger.Info("workload starting", "workload", w, "rep", rep, "of", cfg.Reps)
				m, err := runWorkload(ctx, &sc, w, rep)
				if m != nil {
					if reps[w+side] == nil {
						reps[w+side] = map[int][]Metric{}
					}
					reps[w+side][rep] = m
					this[w+side] = m
					if cfg.Reps > 1 || side != "" {
						// The table shows medians; each rep's own figures say
						// how far apart they were (and pair a rep's off and on).
						sc.Logger.Info("workload done", "workload", w, "rep", rep, "figures", figureList(m))
					}
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("%s%s rep %d: %w", w, sideSuffix(side), rep, err))
					if ctx.Err() != nil {
						break reps
					}
				}
			}
		}
		for _, side := range cfg.sides() {
			// The rep's own share: aggregate takes the median of them, a
			// comparison pairs them rep by rep.
			if share, ok := chainsShare(this[Latency+side], this[Chains+side]); ok {
				reps[Chains+side][rep] = append(slices.Clone(reps[Chains+side][rep]), Metric{Name: mChainsVsSingle, Value: share})
			}
		}
	}
	equalSpeedShares(reps, cfg.sides())
	var results []Result
	for _, w := range workloads {
		for _, side := range cfg.sides() {
			byRep := reps[w+side]
			if len(byRep) == 0 {
				continue
			}
			sc := cfg.sideConfig(side)
			r := aggregate(w, settingsOf(&sc, w), inRepOrder(byRep))
			r.Side, r.byRep = side, byRep
			results = append(results, r)
		}
	}
	placeChainsShare(results)
	return results, errors.Join(errs...)
}

// inRepOrder lists the reps' figures by rep number.
func inRepOrder(byRep map[int][]Metric) [][]Metric {
	nums := slices.Sorted(maps.Keys(byRep))
	out := make([][]Metric, len(nums))
	for i, n := range nums {
		out[i] = byRep[n]
	}
	return out
}

// sideSuffix is side as it follows a workload's name in labels and errors.
func sideSuffix(side string) string {
	if side == "" {
		return ""
	}
	return "-" + side
}

// chainsShare is one rep's chains a second as a share of its single tasks
// a second (the latency workload's tasks_per_s, with a rate above what ax
// keeps up with: how many two-step workflows it completes for every
// single task), in per cent; ok is false unless both ran.
func chainsShare(latency, chains []Metric) (share float64, ok bool) {
	perS, lok := Result{Metrics: latency}.Metric(mTasksPerS)
	chainsPerS, cok := Result{Metrics: chains}.Metric(mChainsPerS)
	if !lok || !cok || perS <= 0 {
		return 0, false
	}
	return 100 * chainsPerS / perS, true
}

// equalSpeedShares adds to each rep's chains figures its share at equal
// speed (chains_vs_single_pct_equal_speed). The machine's speed drifts by
// a fifth within minutes, and a rep runs its single tasks and its chains
// a minute apart, so one rep's share can be a tenth too high or too low
// for no reason in ax. The harness does the same work for every task of a
// workload in every rep, so its CPU a task is the rep's speed: the share
// is scaled by how much slower each workload's harness ran than its
// median over every rep of every side, which is what the share would be
// had both run at that speed.
func equalSpeedShares(reps map[string]map[int][]Metric, sides []string) {
	harness := prefixCPUPerTask + harnessName
	type rep struct {
		side           string
		n              int
		share, lat, ch float64
	}
	var got []rep
	var lats, chs []float64
	for _, side := range sides {
		for n, chains := range reps[Chains+side] {
			share, sok := Result{Metrics: chains}.Metric(mChainsVsSingle)
			ch, cok := Result{Metrics: chains}.Metric(harness)
			lat, lok := Result{Metrics: reps[Latency+side][n]}.Metric(harness)
			if !sok || !cok || !lok || ch <= 0 || lat <= 0 {
				continue
			}
			got = append(got, rep{side: side, n: n, share: share, lat: lat, ch: ch})
			lats, chs = append(lats, lat), append(chs, ch)
		}
	}
	if len(got) == 0 {
		return
	}
	refLat, refCh := Median(lats), Median(chs)
	for _, r := range got {
		chains := reps[Chains+r.side]
		chains[r.n] = append(slices.Clone(chains[r.n]),
			Metric{Name: mChainsVsSingleEqualSpeed, Value: r.share * (r.ch / refCh) / (r.lat / refLat)})
	}
}

// placeChainsShare moves the medians of the reps' shares, which aggregate
// put last, right after the chains workload's chains_per_s.
func placeChainsShare(results []Result) {
	for i := range results {
		if results[i].Workload != Chains {
			continue
		}
		ms := results[i].Metrics
		var shares []Metric
		for _, name := range []string{mChainsVsSingle, mChainsVsSingleEqualSpeed} {
			if from := slices.IndexFunc(ms, func(m Metric) bool { return m.Name == name }); from >= 0 {
				shares = append(shares, ms[from])
				ms = slices.Delete(ms, from, from+1)
			}
		}
		at := slices.IndexFunc(ms, func(m Metric) bool { return m.Name == mChainsPerS }) + 1
		results[i].Metrics = slices.Insert(ms, at, shares...)
	}
}

func runWorkload(ctx context.Context, cfg *Config, w string, rep int) ([]Metric, error) {
	label := fmt.Sprintf("%s-%d%s", w, rep, sideSuffix(cfg.side))
	switch w {
	case Throughput:
		e2e, err := withRun(ctx, cfg, label, cfg.CPUProfileDir != "", (*run).throughputE2E)
		if (err != nil && e2e == nil) || ctx.Err() != nil {
			return e2e, err
		}
		proc, perr := withRun(ctx, cfg, label+"-process", false, (*run).throughputProcess)
		return mergeProcess(e2e, proc), errors.Join(err, perr)
	case Latency:
		return withRun(ctx, cfg, label, cfg.CPUProfileDir != "", (*run).latency)
	case Delayed:
		return withRun(ctx, cfg, label, cfg.CPUProfileDir != "", (*run).delayed)
	case Retry:
		return withRun(ctx, cfg, label, cfg.CPUProfileDir != "", (*run).retry)
	case Retention:
		return retention(ctx, cfg, label)
	case Schedules:
		return withRun(ctx, cfg, label, cfg.CPUProfileDir != "", (*run).schedules)
	case Chains:
		return withRun(ctx, cfg, label, cfg.CPUProfileDir != "", (*run).chains)
	case Find:
		return find(ctx, cfg, label)
	}
	return nil, fmt.Errorf("unknown workload %q", w)
}

// withRun starts (or, remotely, finds) the target, listens for reports,
// runs fn and tears everything down whatever happened.
func withRun(ctx context.Context, cfg *Config, label string, profile bool,
	fn func(*run, context.Context) ([]Metric, error)) ([]Metric, error) {
	r := &run{cfg: cfg, logger: cfg.Logger.With("run", label)}
	var sink *traceSink
	if cfg.Remote() {
		r.target = remoteTarget(cfg)
	} else {
		local := cfg
		if cfg.Trace {
			var err error
			if sink, local, err = startTraceSink(cfg); err != nil {
				return nil, err
			}
			defer sink.close()
		}
		t, err := startLocal(ctx, local, label, profile)
		if err != nil {
			return nil, err
		}
		r.target = t
		r.logger.Info("ax started", "topology", cfg.Topology, "api", t.api, "nats", t.natsURL)
	}
	// Stopped early by a traced run, to count the spans flushed at exit.
	r.target.stop = sync.OnceFunc(r.target.stop)
	defer r.target.stop()
	col, err := listen(r.target.natsURL, r.logger)
	if err != nil {
		return nil, err
	}
	defer col.close()
	r.col = col
	if r.db, err = sql.Open("mysql", r.target.dsn); err != nil {
		return nil, fmt.Errorf("open mysql: %w", err)
	}
	defer r.db.Close()
	r.api = apiClient(r.target.api, cfg.MaxInFlight)
	if _, err := r.api.GetType(ctx, TypeBench); err != nil {
		return nil, fmt.Errorf("task type %s: %w (its executors must serve the built-ins: --builtins, on by default under `ax up`)", TypeBench, err)
	}
	out, err := fn(r, ctx)
	if sink != nil {
		// The processes flush what they hold when they stop.
		r.target.stop()
		out = append(out, Metric{Name: "spans_exported", Value: float64(sink.Count())})
	}
	return out, err
}

// startCosts opens the measured window of the run.
func (r *run) startCosts() { r.meter = startCosts(r.target.procs, r.logger) }

// settingsOf lists what a workload ran with.
func settingsOf(cfg *Config, w string) []Setting {
	var s []Setting
	switch w {
	case Throughput:
		s = []Setting{{"n", cfg.N}, {"submit", "batch"}, {"batch", cfg.BatchSize}, {"batch_workers", cfg.BatchWorkers}}
	case Latency:
		s = []Setting{{"rate", cfg.Rate}, {"duration", cfg.Duration.String()}, {"submit", "single"}}
	case Delayed:
		s = []Setting{{"rate", cfg.Rate}, {"duration", cfg.Duration.String()}, {"delay", cfg.Delay.String()}, {"submit", "single"}}
	case Retry:
		s = []Setting{{"n", cfg.RetryN}, {"fail_attempts", 1}, {"backoff", contracts.MinTypeDuration.String()}, {"submit", "batch"}}
	case Chains:
		s = []Setting{{"rate", cfg.Rate}, {"duration", cfg.Duration.String()}, {"steps", 2}, {"submit", "workflow"}}
	case Retention:
		s = []Setting{{"seeded", cfg.RetentionN}, {"retain_success", seedRetainOn.String()}, {"rate", cfg.Rate},
			{"duration", cfg.Duration.String()}, {"submit", "single"}}
	case Schedules:
		s = []Setting{{"schedules", cfg.SchedulesN}, {"cron", "* * * * * *"}, {"duration", cfg.Duration.String()}, {"type", "paused"}}
	case Find:
		s = []Setting{{"seeded", cfg.FindN}, {"calls_per_query", findCalls}, {"page", findPageLen}, {"pages_walked", findPages}, {"console_loads", consoleLoads}}
	}
	if cfg.Remote() {
		return append(s, Setting{"target", "remote"})
	}
	s = append(s, Setting{"concurrency", cfg.Concurrency}, Setting{"topology", cfg.Topology})
	if cfg.side == SideB && cfg.VsAxBin != "" {
		s = append(s, Setting{"ax_bin", cfg.AxBin})
	}
	if len(cfg.AxFlags) > 0 {
		s = append(s, Setting{"ax_flags", strings.Join(cfg.AxFlags, " ")})
	}
	if cfg.Trace {
		s = append(s, Setting{"tracing", "otlp/http to the harness"})
	}
	return s
}

// randomSuffix names one run's database and Redis prefix.
func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// figureList writes metrics as name=value pairs, in their order.
func figureList(ms []Metric) string {
	var b strings.Builder
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%.4g", m.Name, m.Value)
	}
	return b.String()
}
