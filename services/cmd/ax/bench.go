package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/axsched/ax/services/bench"
)

// newBenchCmd is `ax bench`: ax's four standard workloads through the
// public path, printed as figures. It never fails on speed; it fails when
// tasks went missing or ax could not be run. It reads no AX_* variables:
// an exported AX_API must not turn a local run into a remote one.
func newBenchCmd() *cobra.Command {
	var cfg bench.Config
	var output, natsServer string
	var pids []string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run the standard workloads (throughput, latency, delayed, retry) and print figures",
		Long: `Runs the standard workloads through the public path (submit API -> timer ->
dispatcher -> executor) with the built-in ax.bench task type, and prints one
row of figures per workload (-o text: a Markdown table; -o json: one object
per line). Besides its own figures, every workload reports the CPU of each
process (ax, NATS, MariaDB, Redis) in seconds and per task
(cpu_ms_per_task.*), and the latency workload where its time went, hop by
hop, from the submit commit to the handler and from the handler to its
outcome (hop.<hop>_p50_ms, _p99_ms).

By default it starts ax itself for every run, with the durable defaults: a
nats-server child (JetStream, store in a temp dir), ` + "`ax up --nats-url`" + ` (or five
service processes with --topology split), a fresh MySQL database and Redis
prefix, and stops and removes them at the end of the run. With --api it
measures a running deployment instead (--nats-url and --mysql-dsn too).

With --vs-ax-flag or --vs-ax-bin it compares two sides: every rep of every
workload runs as given (side A) and with those flags or that ax (side B),
alternating which goes first (ABBA), and the report adds B's headline
figures against A's: medians, change, and in how many reps B did better.

Progress goes to stderr, results to stdout. See docs/benchmarks.md.`,
		Example: `  ax bench                                          # all four workloads, standard sizes
  ax bench --workload throughput --n 5000 --reps 3 -o json
  ax bench --topology split --cpuprofile prof/
  ax bench --workload throughput --ax-flag=--fetchers=1
  ax bench --workload retry --reps 8 --vs-ax-flag=--outcome-writers=1
  ax bench --reps 4 --vs-ax-bin /tmp/ax-before         # this build (A) against an older one (B)
  ax bench --api http://10.0.0.5:8080 --nats-url nats://10.0.0.5:4222 \
    --mysql-dsn 'ax:pw@tcp(10.0.0.6:3306)/ax' --pid ax=4242`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			format, err := benchFormat(output)
			if err != nil {
				return err
			}
			cfg.Logger = slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelInfo}))
			if err := completeBenchConfig(&cfg, natsServer, pids); err != nil {
				return err
			}
			results, runErr := bench.Run(cmd.Context(), cfg)
			if err := bench.Write(cmd.OutOrStdout(), format, results); err != nil {
				return err
			}
			return runErr
		},
	}
	fs := cmd.Flags()
	fs.StringSliceVar(&cfg.Workloads, "workload", bench.AllWorkloads, "workloads to run, comma-separated; also retention (pruning a million finished tasks under the latency workload), schedules (fire lateness of --schedules-n every-second schedules), chains (two-step workflows: release latency, chains/s, lineage of 1,000 steps) and find (list and stats latency and console page loads on a million tasks), run only when named")
	fs.IntVar(&cfg.N, "n", bench.NDefault, "throughput: tasks per run")
	fs.IntVar(&cfg.Rate, "rate", bench.RateDefault, "latency, delayed: submissions per second (open loop, one task per HTTP call)")
	fs.DurationVar(&cfg.Duration, "duration", bench.DurationDefault, "latency, delayed: how long the open loop submits")
	fs.DurationVar(&cfg.Delay, "delay", bench.DelayDefault, "delayed: each task's delay")
	fs.IntVar(&cfg.RetryN, "retry-n", bench.RetryNDefault, "retry: tasks that fail once, then succeed")
	fs.IntVar(&cfg.SchedulesN, "schedules-n", bench.SchedulesNDefault, "schedules: every-second schedules fired (--workload schedules only)")
	fs.IntVar(&cfg.RetentionN, "retention-n", bench.RetentionNDefault, "retention: finished tasks seeded, then pruned while the latency workload runs (--workload retention only)")
	fs.IntVar(&cfg.FindN, "find-n", bench.FindNDefault, "find: tasks seeded (and a tenth as many workflows), then listed and counted through GET /v1/tasks, GET /v1/workflows and GET /v1/stats (--workload find only)")
	fs.IntVar(&cfg.Concurrency, "concurrency", bench.ConcurrencyDefault, "tasks the started executor runs at once (ax --concurrency)")
	fs.IntVar(&cfg.Reps, "reps", bench.RepsDefault, "runs per workload, each rep running every workload in turn; each figure is the median")
	fs.StringVarP(&output, "output", "o", "text", "text (a Markdown table; table is the same) or json (one object per workload per line)")
	fs.IntVar(&cfg.BatchSize, "batch", bench.BatchSizeDefault, "tasks per batch submission (at most 1000)")
	fs.IntVar(&cfg.BatchWorkers, "batch-workers", bench.BatchWorkersDefault, "batch submissions in flight")
	fs.IntVar(&cfg.MaxInFlight, "max-in-flight", bench.MaxInFlightDefault, "open loop: most outstanding submissions")
	fs.DurationVar(&cfg.StallTimeout, "stall-timeout", bench.StallTimeoutDefault, "give up on a run when no task finished for this long")
	fs.StringVar(&cfg.Topology, "topology", bench.TopologyUp, "local mode: up (one ax up process) or split (five service processes)")
	fs.StringVar(&natsServer, "nats-server", "", "local mode: nats-server executable (default: nats-server next to ax)")
	fs.StringVar(&cfg.MySQLDSN, "mysql-dsn", bench.MySQLDSNDefault, "local mode: MySQL server; each run gets a fresh database <name>_<random>, dropped after. Remote mode: the deployment's database")
	fs.StringVar(&cfg.RedisAddr, "redis-addr", bench.RedisAddrDefault, "local mode: Redis for the started ax (a fresh key prefix per run, deleted after)")
	fs.StringVar(&cfg.CPUProfileDir, "cpuprofile", "", "local mode: directory where the ax processes write CPU profiles, one file per run and process (<workload>-<rep>[-<side>]-<process>.pprof)")
	fs.StringArrayVar(&cfg.AxFlags, "ax-flag", nil, "local mode: pass a flag to every started ax process, e.g. --ax-flag=--relay-gap-tracking=false (repeatable)")
	fs.StringVar(&cfg.VsAxBin, "vs-ax-bin", "", "local mode: compare with this ax executable as side B (side A runs the ax running bench); every rep of every workload runs on both sides, in ABBA order")
	fs.StringArrayVar(&cfg.VsAxFlags, "vs-ax-flag", nil, "local mode: side B passes this flag to its ax processes after --ax-flag (repeatable); every rep of every workload runs on both sides, in ABBA order")
	fs.BoolVar(&cfg.Trace, "trace", false, "local mode: ax exports trace spans (--otlp-endpoint) to a collector in the harness, which counts them (spans_exported): the cost of tracing")
	fs.StringVar(&cfg.API, "api", "", "remote mode: submitter base URL of a running deployment")
	fs.StringVar(&cfg.NATSURL, "nats-url", "", "remote mode: the deployment's NATS, where ax.bench reports arrive")
	fs.StringArrayVar(&pids, "pid", nil, "remote mode: sample a process's CPU and RSS, as name=PID (repeatable)")
	return cmd
}

// benchFormat maps -o to bench's formats: text (table is kept as its old
// name) or json, the values every other command takes.
func benchFormat(output string) (string, error) {
	switch output {
	case "text", bench.FormatTable:
		return bench.FormatTable, nil
	case bench.FormatJSON:
		return bench.FormatJSON, nil
	}
	return "", fmt.Errorf("--output %q: want text or json", output)
}

// completeBenchConfig fills in what flags leave implicit: the executables
// of local mode, the --pid list and an absolute profile directory.
func completeBenchConfig(cfg *bench.Config, natsServer string, pids []string) error {
	for _, p := range pids {
		name, v, ok := strings.Cut(p, "=")
		pid, err := strconv.Atoi(v)
		if !ok || name == "" || err != nil || pid <= 0 {
			return fmt.Errorf("--pid %q: want name=PID", p)
		}
		cfg.PIDs = append(cfg.PIDs, bench.NamedPID{Name: name, PID: pid})
	}
	if cfg.Remote() {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the ax executable: %w", err)
	}
	cfg.AxBin = exe
	cfg.NATSServer = natsServer
	if cfg.NATSServer == "" {
		cfg.NATSServer = filepath.Join(filepath.Dir(exe), "nats-server")
		if _, err := os.Stat(cfg.NATSServer); err != nil {
			// Not beside ax: one on the PATH serves as well.
			if p, lerr := exec.LookPath("nats-server"); lerr == nil {
				cfg.NATSServer = p
			}
		}
	}
	if _, err := os.Stat(cfg.NATSServer); err != nil {
		return fmt.Errorf("local mode starts a nats-server and found none beside ax or on the PATH (%w): "+
			"build it with make bin/nats-server (make run and make bench do), or give --nats-server PATH, "+
			"or measure a running ax with --api and --nats-url", err)
	}
	if cfg.CPUProfileDir != "" {
		if cfg.CPUProfileDir, err = filepath.Abs(cfg.CPUProfileDir); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := os.MkdirAll(cfg.CPUProfileDir, 0o755); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
	}
	if cfg.VsAxBin != "" {
		// Children start in a directory of their own: a relative path
		// would name nothing there.
		if cfg.VsAxBin, err = filepath.Abs(cfg.VsAxBin); err != nil {
			return fmt.Errorf("--vs-ax-bin: %w", err)
		}
		st, err := os.Stat(cfg.VsAxBin)
		if err != nil {
			return fmt.Errorf("--vs-ax-bin: %w", err)
		}
		if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
			return fmt.Errorf("--vs-ax-bin %s: not an executable file", cfg.VsAxBin)
		}
	}
	return nil
}
