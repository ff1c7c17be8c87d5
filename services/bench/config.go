package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Defaults of Config: the standard workloads, as docs/benchmarks.md
// measures its figures of record with them.
const (
	NDefault            = 50_000
	RateDefault         = 1_000
	DurationDefault     = 20 * time.Second
	DelayDefault        = 2 * time.Second
	RetryNDefault       = 2_000
	ConcurrencyDefault  = 100
	RepsDefault         = 1
	BatchSizeDefault    = 1_000 // the API's largest batch
	BatchWorkersDefault = 4
	MaxInFlightDefault  = 2_000
	StallTimeoutDefault = 2 * time.Minute
	TopologyUp          = "up"
	TopologySplit       = "split"
	MySQLDSNDefault     = "root@tcp(127.0.0.1:3306)/ax_bench"
	RedisAddrDefault    = "127.0.0.1:6379"
)

// Config says what to run and against what. With API empty the harness
// starts ax itself for every run (local mode); with API set it measures a
// running deployment (remote mode).
type Config struct {
	// Workloads to run, in AllWorkloads order.
	Workloads []string
	// N is the task count of the throughput workload.
	N int
	// Rate (tasks/s) and Duration shape the open loop of the latency and
	// delayed workloads; Delay is the delayed workload's delay.
	Rate     int
	Duration time.Duration
	Delay    time.Duration
	// RetryN is the task count of the retry workload.
	RetryN int
	// RetentionN is how many finished tasks the retention workload seeds.
	RetentionN int
	// SchedulesN is how many every-second schedules the schedules
	// workload fires.
	SchedulesN int
	// FindN is how many tasks the find workload seeds.
	FindN int
	// Concurrency is the executor's pool per type (local mode).
	Concurrency int
	// Reps runs every workload this many times; figures are medians.
	Reps int
	// BatchSize and BatchWorkers shape batch submission: that many tasks
	// per request, that many requests in flight.
	BatchSize    int
	BatchWorkers int
	// MaxInFlight bounds the open loop's outstanding submissions; reaching
	// it delays sends, which shows as submit_lag_max_ms.
	MaxInFlight int
	// StallTimeout gives up on a run when no task finished for this long.
	StallTimeout time.Duration

	// AxBin and NATSServer are the executables local mode starts.
	AxBin      string
	NATSServer string
	// Topology is TopologyUp (one `ax up`) or TopologySplit (five
	// processes, one per service).
	Topology string
	// MySQLDSN: in local mode its database name is the prefix of the fresh
	// database of each run; in remote mode it is the deployment's.
	MySQLDSN string
	// RedisAddr is the Redis local mode runs ax against.
	RedisAddr string
	// CPUProfileDir, when set, makes the ax children of every measured run
	// (not the throughput process-only run) write CPU profiles there
	// (local mode).
	CPUProfileDir string
	// AxFlags are passed to every ax process local mode starts, after its
	// own flags (so they win), e.g. --relay-gap-tracking=false.
	AxFlags []string
	// VsAxBin and VsAxFlags, when either is set, compare two sides (local
	// mode): every rep of every workload runs as configured (side A) and
	// with this ax executable and these flags after AxFlags (side B), in
	// ABBA order, and the report sets B's figures against A's.
	VsAxBin   string
	VsAxFlags []string
	// Trace makes every started ax export its spans (--otlp-endpoint) to a
	// collector in the harness that counts them (local mode): what
	// tracing costs, against a run without.
	Trace bool

	// API is the submitter of a running deployment (remote mode); NATSURL
	// is its NATS, PIDs the processes whose cost to report.
	API     string
	NATSURL string
	PIDs    []NamedPID

	// Logger receives human progress.
	Logger *slog.Logger

	// seed, when set, fills a local run's database after migration and
	// before ax starts; axArgs are added to the started ax's arguments.
	seed   func(ctx context.Context, dsn string) error
	axArgs []string
	// side is the side of a comparison this configuration runs (sideConfig).
	side string
}

// NamedPID names a process of a remote deployment to sample.
type NamedPID struct {
	Name string
	PID  int
}

// Remote reports whether the harness measures a running deployment.
func (c *Config) Remote() bool { return c.API != "" }

// Validate explains the first unusable setting.
func (c *Config) Validate() error {
	if len(c.Workloads) == 0 {
		return errors.New("no workload: give at least one of " + strings.Join(AllWorkloads, ", "))
	}
	for _, w := range c.Workloads {
		if !slices.Contains(KnownWorkloads, w) {
			return fmt.Errorf("unknown workload %q: want %s", w, strings.Join(KnownWorkloads, ", "))
		}
	}
	if slices.Contains(c.Workloads, Find) && (c.FindN <= 0 || c.Remote()) {
		return fmt.Errorf("the find workload needs local mode and a positive --find-n, got %d", c.FindN)
	}
	if slices.Contains(c.Workloads, Retention) && (c.RetentionN <= 0 || c.Remote()) {
		return fmt.Errorf("the retention workload needs local mode and a positive --retention-n, got %d", c.RetentionN)
	}
	if slices.Contains(c.Workloads, Schedules) && c.SchedulesN <= 0 {
		return fmt.Errorf("the schedules workload needs a positive --schedules-n, got %d", c.SchedulesN)
	}
	for _, p := range []struct {
		name string
		v    int
	}{{"n", c.N}, {"rate", c.Rate}, {"retry-n", c.RetryN}, {"concurrency", c.Concurrency}, {"reps", c.Reps},
		{"batch size", c.BatchSize}, {"batch workers", c.BatchWorkers}, {"max in flight", c.MaxInFlight}} {
		if p.v <= 0 {
			return fmt.Errorf("%s must be at least 1, got %d", p.name, p.v)
		}
	}
	if c.BatchSize > BatchSizeDefault {
		return fmt.Errorf("batch size %d is over the API's limit of %d", c.BatchSize, BatchSizeDefault)
	}
	if c.Duration <= 0 || c.Delay < 0 || c.StallTimeout <= 0 {
		return fmt.Errorf("duration (%s) and stall timeout (%s) must be positive, delay (%s) not negative", c.Duration, c.StallTimeout, c.Delay)
	}
	if _, err := mysql.ParseDSN(c.MySQLDSN); err != nil {
		return fmt.Errorf("mysql dsn: %w", err)
	}
	if c.Remote() {
		if c.NATSURL == "" {
			return errors.New("remote mode (--api) needs --nats-url: the harness listens there for the ax.bench reports")
		}
		if c.CPUProfileDir != "" || len(c.AxFlags) > 0 || c.Compare() {
			return errors.New("--cpuprofile, --ax-flag, --vs-ax-bin and --vs-ax-flag need local mode: start remote processes with the flags yourself")
		}
		return nil
	}
	if c.Topology != TopologyUp && c.Topology != TopologySplit {
		return fmt.Errorf("topology %q: want %s or %s", c.Topology, TopologyUp, TopologySplit)
	}
	if c.AxBin == "" || c.NATSServer == "" || c.RedisAddr == "" {
		return errors.New("local mode needs the ax and nats-server executables and a Redis address")
	}
	if len(c.PIDs) > 0 {
		return errors.New("--pid is for remote mode; local mode samples the processes it starts")
	}
	return nil
}
