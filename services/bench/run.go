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

// placeChainsShare moves the median of the reps' shares, which aggregate
// put last, right after the chains workload's chains_per_s.
func placeChainsShare(results []Result) {
	for i := range results {
		ms := results[i].Metrics
		from := slices.IndexFunc(ms, func(m Metric) bool { return m.Name == mChainsVsSingle })
		if results[i].Workload != Chains || from < 0 {
			continue
		}
		share := ms[from]
		ms = slices.Delete(ms, from, from+1)
		at := slices.IndexFunc(ms, func(m Metric) bool { return m.Name == mChainsPerS }) + 1
		results[i].Metrics = slices.Insert(ms, at, share)
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
