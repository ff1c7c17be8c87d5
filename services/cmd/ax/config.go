package main

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"

	"github.com/axsched/ax/services/app"
	"github.com/axsched/ax/services/bench"
	"github.com/axsched/ax/services/demo"
	"github.com/axsched/ax/services/executor"
	"github.com/axsched/ax/services/internal/auth"
	"github.com/axsched/ax/services/internal/gctune"
	"github.com/axsched/ax/services/internal/membership"
	"github.com/axsched/ax/services/internal/natsembed"
	"github.com/axsched/ax/services/internal/ops"
	"github.com/axsched/ax/services/internal/outbox"
	"github.com/axsched/ax/services/internal/ring"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/reaper"
	"github.com/axsched/ax/services/timer"
)

// Documented defaults (docs/operations.md lists them all).
const (
	defaultMySQLDSN   = "root@tcp(127.0.0.1:3306)/ax"
	defaultRedisAddr  = "127.0.0.1:6379"
	defaultAPI        = "http://127.0.0.1:8080"
	defaultDataDir    = ".data"
	defaultNATSListen = "127.0.0.1:4223"
)

// serviceHTTPDefaults gives each service its own port so all five can run
// side by side on one machine.
var serviceHTTPDefaults = map[string]string{
	"up":         "127.0.0.1:8080",
	"submitter":  "127.0.0.1:8080",
	"timer":      "127.0.0.1:8081",
	"dispatcher": "127.0.0.1:8082",
	"executor":   "127.0.0.1:8083",
	"reaper":     "127.0.0.1:8084",
}

func envStr(name, def string) string {
	if v, ok := os.LookupEnv(name); ok {
		return v
	}
	return def
}

func envInt(name string, def int) int {
	if v, ok := os.LookupEnv(name); ok {
		if n, err := strconv.Atoi(v); err == nil {
			return n
		}
		fmt.Fprintf(os.Stderr, "ax: ignoring %s=%q: not an integer\n", name, v)
	}
	return def
}

func envDur(name string, def time.Duration) time.Duration {
	if v, ok := os.LookupEnv(name); ok {
		if d, err := time.ParseDuration(v); err == nil {
			return d
		}
		fmt.Fprintf(os.Stderr, "ax: ignoring %s=%q: not a duration\n", name, v)
	}
	return def
}

func envFloat(name string, def float64) float64 {
	if v, ok := os.LookupEnv(name); ok {
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			return f
		}
		fmt.Fprintf(os.Stderr, "ax: ignoring %s=%q: not a number\n", name, v)
	}
	return def
}

// envList splits a comma-separated variable; unset or empty is nil.
func envList(name string) []string {
	var out []string
	for _, v := range strings.Split(os.Getenv(name), ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func envBool(name string, def bool) bool {
	if v, ok := os.LookupEnv(name); ok {
		if b, err := strconv.ParseBool(v); err == nil {
			return b
		}
		fmt.Fprintf(os.Stderr, "ax: ignoring %s=%q: not a boolean\n", name, v)
	}
	return def
}

// serverFlags holds every setting of the server commands.
type serverFlags struct {
	cfg         app.Config
	logLevel    string
	logFormat   string
	concurrency int
	builtins    bool
	webhooks    []string
	secretFile  string
	heartbeat   time.Duration
	// claimAfter is cfg.Executor.ClaimAfter, where 0 means none.
	claimAfter time.Duration
	// runReleasedHere is !cfg.Executor.SendReleased.
	runReleasedHere bool
	// preparedStatements is cfg.MySQLPreparedStatements, where 0 means
	// none.
	preparedStatements int
	// relayGapTracking is the inverse of cfg.Relay.NoGapTracking.
	relayGapTracking bool
	// workflowStepsOnRow is the inverse of cfg.WorkflowStepsInTable.
	workflowStepsOnRow bool
	cpuProfile         string
	// gcFloorMiB is gctune's floor in MiB; 0 leaves the collector alone.
	gcFloorMiB int
	// conn holds the secrets' files and the DSN until resolveSecrets.
	conn connFlags
	// dataDir holds local state; the embedded NATS store is its nats/.
	dataDir string
}

func (f *serverFlags) register(fs *pflag.FlagSet, command string) {
	c := &f.cfg
	f.registerConn(fs)
	fs.IntVar(&f.preparedStatements, "mysql-prepared-statements", envInt("AX_MYSQL_PREPARED_STATEMENTS", store.DefaultPreparedStatements), "most statements this process keeps prepared on its MySQL connections, counted against the server's max_prepared_stmt_count; a text that runs again on a connection is prepared and its values sent binary, not lexed from the text; 0 sends every statement interpolated [AX_MYSQL_PREPARED_STATEMENTS]")
	fs.StringVar(&c.RedisAddr, "redis-addr", envStr("AX_REDIS_ADDR", defaultRedisAddr), "Redis host:port [AX_REDIS_ADDR]")
	fs.IntVar(&c.RedisDB, "redis-db", envInt("AX_REDIS_DB", 0), "Redis database number [AX_REDIS_DB]")
	fs.StringVar(&c.RedisPrefix, "redis-prefix", envStr("AX_REDIS_PREFIX", "ax"), "prefix of every Redis key [AX_REDIS_PREFIX]")
	fs.StringVar(&c.NATSURL, "nats-url", envStr("AX_NATS_URL", ""), "NATS URL; under ax up, empty starts an embedded server [AX_NATS_URL]")
	fs.DurationVar(&c.EventsMaxAge, "events-max-age", envDur("AX_EVENTS_MAX_AGE", 7*24*time.Hour), "how long the AX_EVENTS stream keeps an event, at least 2m [AX_EVENTS_MAX_AGE]")
	fs.IntVar(&c.StreamReplicas, "stream-replicas", envInt("AX_STREAM_REPLICAS", 1), "JetStream stream replicas (3 on a cluster) [AX_STREAM_REPLICAS]")
	fs.StringVar(&c.HTTPAddr, "http", envStr("AX_HTTP_ADDR", serviceHTTPDefaults[command]), "HTTP address for the API (submitter) and /livez /readyz /metrics [AX_HTTP_ADDR]")
	f.registerHTTP(fs)
	fs.IntVar(&c.Shards, "shards", envInt("AX_SHARDS", ring.DefaultShards), "shards of each task type's consistent hash ring, 1..4096 (64 or 256); the same on every process of a cluster (dispatchers, relays and timers route by it) [AX_SHARDS]")
	fs.BoolVar(&f.relayGapTracking, "relay-gap-tracking", envBool("AX_RELAY_GAP_TRACKING", true), "publish history rows past holes in their IDs at once and watch the holes for late rows; false: publish only rows settled for --relay-settle [AX_RELAY_GAP_TRACKING]")
	fs.IntVar(&c.Relay.EventsPerMessage, "relay-events-per-message", envInt("AX_RELAY_EVENTS_PER_MESSAGE", outbox.EventsPerMessageDefault), "most transfers of one subject the relay publishes in one AX_EVENTS message (task.transfers.v1, at most 64 KiB), 1..1000 (0: the default); 1: every transfer alone (task.transferred.v1), for event consumers that read one a message [AX_RELAY_EVENTS_PER_MESSAGE]")
	fs.BoolVar(&f.workflowStepsOnRow, "workflow-steps-on-row", envBool("AX_WORKFLOW_STEPS_ON_ROW", true), "list the steps of a new workflow without compensations on the workflow's row, not a row each in workflow_steps; false while processes of a version before it run (they would not find those steps) [AX_WORKFLOW_STEPS_ON_ROW]")
	fs.DurationVar(&c.Relay.Settle, "relay-settle", envDur("AX_RELAY_SETTLE", store.SettleDefault), "without gap tracking, how long the relay stays behind the newest history row; longer than any transaction that writes history [AX_RELAY_SETTLE]")
	fs.StringVar(&c.OTLPEndpoint, "otlp-endpoint", envStr("AX_OTLP_ENDPOINT", ""), "export trace spans over OTLP/HTTP to this collector, e.g. http://localhost:4318 (/v1/traces is added when no path is given); empty: tracing off unless OTEL_EXPORTER_OTLP_ENDPOINT is set [AX_OTLP_ENDPOINT]")
	fs.StringVar(&c.Node, "node", envStr("AX_NODE", membership.DefaultName()), "name of this process in history, locks and task rows [AX_NODE]")
	fs.Int64Var(&c.NodeID, "node-id", int64(envInt("AX_NODE_ID", rand.IntN(1024))), "snowflake node ID 0..1023, distinct per submitter or timer (default random) [AX_NODE_ID]")
	fs.StringVar((*string)(&c.Auth), "auth", envStr("AX_AUTH", string(auth.ModeAuto)), "check API keys: auto (on unless bound to loopback with no key; bound elsewhere with no key, refuse to start), on, or off [AX_AUTH]")
	if command == "up" {
		// Only the one-process try-out migrates; a service runs on the
		// schema `ax migrate up` made, as a user without DDL rights.
		fs.BoolVar(&c.Migrate, "migrate", envBool("AX_MIGRATE", true), "apply pending migrations at start (ax up only; services need ax migrate up first) [AX_MIGRATE]")
	}
	fs.StringVar(&f.logLevel, "log-level", envStr("AX_LOG_LEVEL", "info"), "debug, info, warn or error [AX_LOG_LEVEL]")
	fs.StringVar(&f.logFormat, "log-format", envStr("AX_LOG_FORMAT", "text"), "text or json [AX_LOG_FORMAT]")

	fs.StringVar(&f.dataDir, "data-dir", envStr("AX_DATA_DIR", defaultDataDir), "directory of this process's local state; the embedded NATS JetStream store goes in DIR/nats [AX_DATA_DIR]")
	fs.StringVar(&c.Embedded.Listen, "nats-listen", envStr("AX_NATS_LISTEN", defaultNATSListen), "client address of the embedded NATS server [AX_NATS_LISTEN]")
	fs.StringVar(&c.Embedded.Sync, "nats-sync", envStr("AX_NATS_SYNC", natsembed.SyncDefault), "embedded JetStream fsync policy: default or always [AX_NATS_SYNC]")

	fs.Int64Var(&c.Submitter.MaxPayload, "max-payload", int64(envInt("AX_MAX_PAYLOAD", 64<<10)), "largest task payload in bytes [AX_MAX_PAYLOAD]")
	fs.DurationVar(&c.Submitter.MaxHorizon, "max-horizon", envDur("AX_MAX_HORIZON", 365*24*time.Hour), "how far ahead a task may be scheduled [AX_MAX_HORIZON]")

	fs.DurationVar(&c.Timer.Interval, "timer-interval", envDur("AX_TIMER_INTERVAL", 500*time.Millisecond), "longest the timer loop sleeps [AX_TIMER_INTERVAL]")
	fs.DurationVar(&c.Timer.ReconcileInterval, "reconcile-interval", envDur("AX_RECONCILE_INTERVAL", 5*time.Second), "how often MySQL is searched for stale READY tasks [AX_RECONCILE_INTERVAL]")
	fs.DurationVar(&c.Timer.ReconcileGrace, "reconcile-grace", envDur("AX_RECONCILE_GRACE", 5*time.Second), "how overdue an undispatched READY task must be to be re-driven [AX_RECONCILE_GRACE]")
	fs.DurationVar(&c.Timer.ScheduleGrace, "schedule-grace", envDur("AX_SCHEDULE_GRACE", timer.ScheduleGraceDefault), "how late a schedule's fire time may be found before it counts as missed and the schedule's catch-up policy applies [AX_SCHEDULE_GRACE]")
	fs.DurationVar(&c.Timer.SchedulePoll, "schedule-poll", envDur("AX_SCHEDULE_POLL", timer.SchedulePollDefault), "longest the schedule loop sleeps: how late a new or changed schedule's first fire may be [AX_SCHEDULE_POLL]")

	fs.DurationVar(&c.Executor.LockTTL, "lock-ttl", envDur("AX_LOCK_TTL", 60*time.Second), "task lease length [AX_LOCK_TTL]")
	fs.DurationVar(&c.Executor.RenewInterval, "renew-interval", envDur("AX_RENEW_INTERVAL", 5*time.Second), "lease renewal and heartbeat period [AX_RENEW_INTERVAL]")
	fs.DurationVar(&c.Executor.ShutdownTimeout, "shutdown-timeout", envDur("AX_SHUTDOWN_TIMEOUT", 30*time.Second), "how long running tasks may finish on SIGTERM [AX_SHUTDOWN_TIMEOUT]")
	fs.IntVar(&c.Executor.Fetchers, "fetchers", envInt("AX_FETCHERS", 4), "claim loops per type, each claiming a batch of up to the free slots; 1 gives strict lane order [AX_FETCHERS]")
	fs.IntVar(&c.Executor.OutcomeWriters, "outcome-writers", envInt("AX_OUTCOME_WRITERS", executor.OutcomeWritersDefault), "transactions recording finished runs at once, each carrying whatever finished meanwhile; one starts beside a running one only once 64 outcomes wait [AX_OUTCOME_WRITERS]")
	fs.DurationVar(&f.claimAfter, "claim-after", envDur("AX_CLAIM_AFTER", executor.ClaimAfterDefault), "fused-claim window: a task whose handler returns within it has its claim written in its outcome's transaction, one commit instead of two; a longer one is claimed when it ends; 0 claims every task before its handler starts; at most 1s [AX_CLAIM_AFTER]")
	fs.BoolVar(&f.runReleasedHere, "run-released-here", envBool("AX_RUN_RELEASED_HERE", true), "an executor takes up the workflow children its outcomes release whose shards it owns itself, without a dispatch message; false sends every one through NATS [AX_RUN_RELEASED_HERE]")
	fs.StringVar(&c.Executor.VersionLabel, "version-label", envStr("AX_EXECUTOR_VERSION", ""), "the version this executor reports and records on the tasks it runs; a type's rollout sends a share of its tasks to one version (default: the build's) [AX_EXECUTOR_VERSION]")
	fs.DurationVar(&c.Executor.AgingAfter, "aging-after", envDur("AX_AGING_AFTER", 30*time.Second), "a task overdue this long counts one lane higher, per period [AX_AGING_AFTER]")
	fs.IntVar(&f.concurrency, "concurrency", envInt("AX_CONCURRENCY", 32), "tasks of each built-in type run at once by this executor [AX_CONCURRENCY]")

	// The demonstration types are on for the one-process try-out and off
	// for a production executor, which should serve only what a team wrote.
	fs.BoolVar(&f.builtins, "builtins", envBool("AX_BUILTINS", command == "up"), "serve the demonstration types ax.noop, ax.sleep, ax.flaky and the bench harness's ax.bench (default on under ax up only) [AX_BUILTINS]")
	fs.StringArrayVar(&f.webhooks, "webhook", nil, "serve task type TYPE by POSTing each task to URL, as TYPE=URL (repeatable); signed with the secret from --webhook-secret-file or AX_WEBHOOK_SECRET")
	fs.StringVar(&f.secretFile, "webhook-secret-file", envStr("AX_WEBHOOK_SECRET_FILE", ""), "file holding the webhook signing secret [AX_WEBHOOK_SECRET_FILE]")
	fs.DurationVar(&c.Reaper.Interval, "reap-interval", envDur("AX_REAP_INTERVAL", time.Second), "reaper pass period [AX_REAP_INTERVAL]")
	fs.DurationVar(&f.heartbeat, "heartbeat-interval", envDur("AX_HEARTBEAT_INTERVAL", 3*time.Second), "executor membership heartbeat period; three missed mean dead [AX_HEARTBEAT_INTERVAL]")
	fs.DurationVar(&c.Reaper.TimeoutGrace, "timeout-grace", envDur("AX_TIMEOUT_GRACE", 30*time.Second), "how long past its timeout a silent RUNNING task may be before the reaper records TIMEOUT [AX_TIMEOUT_GRACE]")
	fs.DurationVar(&c.Reaper.IdempotencyRetention, "idempotency-retention", envDur("AX_IDEMPOTENCY_RETENTION", 0), "delete idempotency keys older than this (reaper); 0 keeps them forever [AX_IDEMPOTENCY_RETENTION]")
	fs.DurationVar(&c.Reaper.Retention.Success, "retain-success", envDur("AX_RETAIN_SUCCESS", reaper.RetainSuccessDefault), "delete SUCCESS tasks, with their history, this long after they ended (reaper); 0 keeps them forever [AX_RETAIN_SUCCESS]")
	fs.DurationVar(&c.Reaper.Retention.Cancelled, "retain-cancelled", envDur("AX_RETAIN_CANCELLED", reaper.RetainCancelledDefault), "delete CANCELLED tasks, with their history, this long after they ended (reaper); 0 keeps them forever [AX_RETAIN_CANCELLED]")
	fs.DurationVar(&c.Reaper.Retention.Failed, "retain-failed", envDur("AX_RETAIN_FAILED", reaper.RetainFailedDefault), "delete tasks failed for good (FAILED/TIMEOUT), with their history and dead letter, this long after they ended (reaper); 0 keeps them forever [AX_RETAIN_FAILED]")
	fs.IntVar(&c.Reaper.Retention.Batch, "retention-batch", envInt("AX_RETENTION_BATCH", reaper.RetentionBatchDefault), "finished tasks deleted per retention transaction: smaller batches hold MySQL for less at a time, larger ones prune faster [AX_RETENTION_BATCH]")
	fs.DurationVar(&c.Reaper.Silence, "reap-silence", envDur("AX_REAP_SILENCE", 15*time.Second), "heartbeat silence after which a RUNNING task's lease is checked [AX_REAP_SILENCE]")
	fs.IntVar(&f.gcFloorMiB, "gc-floor-mib", envInt("AX_GC_FLOOR_MIB", gctune.FloorDefault>>20), "the Go garbage collector runs at this heap size in MiB, or at twice the live heap plus 16 MiB once that is more (GOGC 400 below it); 0 leaves Go's defaults; GOGC or GOMEMLIMIT in the environment turn it off [AX_GC_FLOOR_MIB]")
	// No AX_* variable: one environment is often shared by several
	// processes, which must not write the same profile file.
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to FILE at a clean exit (runtime/pprof)")
}

// registerHTTP registers the HTTP server's timeouts and edge settings.
func (f *serverFlags) registerHTTP(fs *pflag.FlagSet) {
	h := &f.cfg.HTTP
	fs.DurationVar(&h.ReadHeaderTimeout, "http-read-header-timeout", envDur("AX_HTTP_READ_HEADER_TIMEOUT", ops.ReadHeaderTimeoutDefault), "longest a client may take to send a request's headers [AX_HTTP_READ_HEADER_TIMEOUT]")
	fs.DurationVar(&h.ReadTimeout, "http-read-timeout", envDur("AX_HTTP_READ_TIMEOUT", ops.ReadTimeoutDefault), "longest a client may take to send a whole request, body included [AX_HTTP_READ_TIMEOUT]")
	fs.DurationVar(&h.WriteTimeout, "http-write-timeout", envDur("AX_HTTP_WRITE_TIMEOUT", ops.WriteTimeoutDefault), "longest from a request's headers to the end of its answer [AX_HTTP_WRITE_TIMEOUT]")
	fs.DurationVar(&h.IdleTimeout, "http-idle-timeout", envDur("AX_HTTP_IDLE_TIMEOUT", ops.IdleTimeoutDefault), "an idle keep-alive connection is closed after this [AX_HTTP_IDLE_TIMEOUT]")
	fs.StringSliceVar(&h.Edge.AllowedHosts, "allowed-hosts", envList("AX_ALLOWED_HOSTS"), "host names the Host header may name, comma-separated; * allows any (default: localhost, 127.0.0.1, ::1 and the --http host; any when --http binds every interface) [AX_ALLOWED_HOSTS]")
	fs.StringSliceVar(&h.Edge.CORSOrigins, "cors-origins", envList("AX_CORS_ORIGINS"), "origins (https://console.example.com) whose pages may call the API, comma-separated (default none: no CORS) [AX_CORS_ORIGINS]")
	fs.Float64Var(&h.Edge.RateLimit, "rate-limit", envFloat("AX_RATE_LIMIT", 0), "API requests per second per caller (remote IP); 0 is no limit [AX_RATE_LIMIT]")
	fs.IntVar(&h.Edge.RateBurst, "rate-burst", envInt("AX_RATE_BURST", 0), "API requests a caller may send at once (default: --rate-limit rounded up) [AX_RATE_BURST]")
}

func (f *serverFlags) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.logLevel)); err != nil {
		return nil, fmt.Errorf("log level %q: want debug, info, warn or error", f.logLevel)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch f.logFormat {
	case "text":
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	default:
		return nil, fmt.Errorf("log format %q: want text or json", f.logFormat)
	}
}

// executorTypes builds the types this process's executor serves: the
// demonstration types (with --builtins) and every --webhook binding. The
// ax.bench type needs the process's NATS connection, so it comes through
// natsTypes.
func (f *serverFlags) executorTypes() ([]executor.TypeSpec, error) {
	if f.concurrency <= 0 {
		return nil, fmt.Errorf("--concurrency must be at least 1, got %d", f.concurrency)
	}
	var types []executor.TypeSpec
	if f.builtins {
		types = demo.Types()
	}
	if len(f.webhooks) > 0 {
		secret, err := f.webhookSecret()
		if err != nil {
			return nil, err
		}
		for _, w := range f.webhooks {
			name, url, ok := strings.Cut(w, "=")
			if !ok || name == "" || url == "" {
				return nil, fmt.Errorf("--webhook %q: want TYPE=URL", w)
			}
			if urlHasPassword(url) {
				return nil, fmt.Errorf("--webhook %s: the URL holds a password, which every user of this machine can read in the process list; requests are signed with the webhook secret instead", name)
			}
			h, err := executor.Webhook(executor.WebhookConfig{URL: url, Secret: secret})
			if err != nil {
				return nil, fmt.Errorf("--webhook %s: %w", name, err)
			}
			types = append(types, executor.TypeSpec{Name: name, Handler: h})
		}
	}
	for i := range types {
		types[i].Concurrency = f.concurrency
	}
	return types, nil
}

// natsTypes adds ax.bench beside the demonstration types.
func (f *serverFlags) natsTypes() func(nc *nats.Conn) []executor.TypeSpec {
	if !f.builtins {
		return nil
	}
	return func(nc *nats.Conn) []executor.TypeSpec {
		spec := bench.TypeSpec(nc)
		spec.Concurrency = f.concurrency
		return []executor.TypeSpec{spec}
	}
}

// webhookSecret reads the signing secret from a file or AX_WEBHOOK_SECRET,
// never from a flag value, which would show in process listings.
func (f *serverFlags) webhookSecret() ([]byte, error) {
	if f.secretFile != "" {
		b, err := os.ReadFile(f.secretFile)
		if err != nil {
			return nil, fmt.Errorf("webhook secret: %w", err)
		}
		return []byte(strings.TrimSpace(string(b))), nil
	}
	if s := os.Getenv("AX_WEBHOOK_SECRET"); s != "" {
		return []byte(s), nil
	}
	return nil, fmt.Errorf("--webhook needs a signing secret: set AX_WEBHOOK_SECRET or --webhook-secret-file")
}
