// Package app wires ax's services to their dependencies and runs them with
// one lifecycle. `ax up` runs all five with an embedded NATS server; `ax
// <service>` runs one against an external NATS. Shutdown happens in order:
// the services stop taking work and finish what they hold, then the
// relay flushes the last events, then the HTTP server and connections close.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/errgroup"

	"github.com/axsched/ax/services/dispatcher"
	"github.com/axsched/ax/services/executor"
	"github.com/axsched/ax/services/internal/auth"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/dispatch"
	"github.com/axsched/ax/services/internal/httpedge"
	"github.com/axsched/ax/services/internal/idgen"
	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/natsembed"
	"github.com/axsched/ax/services/internal/natsperm"
	"github.com/axsched/ax/services/internal/ops"
	"github.com/axsched/ax/services/internal/outbox"
	"github.com/axsched/ax/services/internal/ring"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/tlsfiles"
	"github.com/axsched/ax/services/internal/tracing"
	"github.com/axsched/ax/services/reaper"
	"github.com/axsched/ax/services/submitter"
	"github.com/axsched/ax/services/timer"
)

// Service names one of the five services.
type Service string

// The five services.
const (
	Submitter  Service = "submitter"
	Timer      Service = "timer"
	Dispatcher Service = "dispatcher"
	Executor   Service = "executor"
	Reaper     Service = "reaper"
)

// maxEventsPerMessage bounds --relay-events-per-message: a thousand
// transfers are ~330 KB, a third of JetStream's default message limit.
const maxEventsPerMessage = 1000

// maxPreparedStatements is the largest max_prepared_stmt_count MySQL and
// MariaDB accept.
const maxPreparedStatements = 1048576

// AllServices lists the services in start order.
var AllServices = []Service{Submitter, Timer, Dispatcher, Executor, Reaper}

// Config is everything a process needs. Defaults are documented on the
// flags in cmd/ax and in docs/operations.md.
type Config struct {
	MySQLDSN    string
	RedisAddr   string
	RedisDB     int
	RedisPrefix string
	// Credentials and TLS of the connections to MySQL (TLS only: its
	// credentials are in the DSN), Redis and NATS. cmd/ax reads passwords
	// from the environment or files, never from flags (they show in ps).
	MySQLTLS      tlsfiles.Files
	RedisUser     string
	RedisPassword string
	RedisTLS      tlsfiles.Files
	NATSUser      string
	NATSPassword  string
	NATSTLS       tlsfiles.Files
	// MySQLPreparedStatements bounds the statements this process keeps
	// prepared on its MySQL connections (store.Options.PreparedStatements):
	// 0 is store.DefaultPreparedStatements, a negative value none.
	MySQLPreparedStatements int
	// WorkflowStepsInTable lists the steps of every new workflow in
	// workflow_steps (store.Options.StepsInTable), for rolling upgrades
	// from versions before migration 0021.
	WorkflowStepsInTable bool
	// NATSURL is the NATS server to use; empty with EmbeddedNATS starts one.
	NATSURL      string
	EmbeddedNATS bool
	Embedded     natsembed.Config
	// StreamReplicas is the JetStream replication factor.
	StreamReplicas int
	// EventsMaxAge is how long AX_EVENTS keeps an event (0: 7 days).
	EventsMaxAge time.Duration
	HTTPAddr     string
	// HTTP holds the HTTP server's timeouts, Host and CORS allow-lists and
	// rate limit.
	HTTP ops.Config
	// Auth says whether API keys are checked (auth.Mode; "" is auto: on
	// unless HTTPAddr is loopback and no key exists, and a process bound
	// beyond loopback with no key refuses to start).
	Auth auth.Mode
	// AuthCache tunes how long looked-up keys are trusted.
	AuthCache auth.Config
	// Node names this process in history rows, locks and task rows.
	Node string
	// Shards is the shard count of every task type's ring (0: 64). Every
	// dispatcher and submitter of a cluster must use the same.
	Shards int
	// NodeID is the snowflake node ID (0..1023) of this submitter.
	NodeID int64
	// Migrate applies pending migrations at start: `ax up` only, the
	// one-process try-out; the services run on what `ax migrate up` made.
	Migrate bool

	Relay      outbox.Config
	Submitter  submitter.Config
	Timer      timer.Config
	Dispatcher dispatcher.Config
	Executor   executor.Config
	Reaper     reaper.Config
	// Types are the task types the executor serves.
	Types []executor.TypeSpec
	// NATSTypes, when set, adds types whose handlers report over the
	// process's NATS connection (the bench harness's ax.bench).
	NATSTypes func(nc *nats.Conn) []executor.TypeSpec

	// LocalClock is this process's clock before correction to Redis TIME;
	// nil means time.Now. Tests skew it.
	LocalClock func() time.Time
	// TypeCacheClock is the clock the services' caches of type settings
	// expire by (nil: the local clock). Tests advance it so that a type
	// change is seen at once rather than after the caches' TTL.
	TypeCacheClock clock.Clock

	// OTLPEndpoint is the OTLP/HTTP collector spans are exported to
	// (tracing.Config.Endpoint); empty: tracing off, unless the standard
	// OTEL_EXPORTER_OTLP_* variables name one.
	OTLPEndpoint string

	// OnReady, when set, is called with the bound HTTP address once every
	// service is running (tests use it with HTTPAddr "127.0.0.1:0").
	OnReady func(httpAddr string)
}

// Validate reports the first unusable setting.
func (c *Config) Validate(services []Service) error {
	if len(services) == 0 {
		return errors.New("no service to run")
	}
	for _, s := range services {
		if !slices.Contains(AllServices, s) {
			return fmt.Errorf("unknown service %q", s)
		}
	}
	if c.MySQLDSN == "" {
		return errors.New("mysql dsn is empty")
	}
	if _, err := store.ParseDSN(c.MySQLDSN); err != nil {
		return err
	}
	if c.RedisAddr == "" {
		return errors.New("redis address is empty")
	}
	if c.NATSURL == "" && !c.EmbeddedNATS {
		return errors.New("nats url is empty: give --nats-url (only `ax up` embeds a NATS server)")
	}
	if c.HTTPAddr == "" {
		return errors.New("http address is empty")
	}
	if c.MySQLPreparedStatements > maxPreparedStatements {
		return fmt.Errorf("mysql prepared statements %d is above %d, MySQL's own bound on a server's (max_prepared_stmt_count)", c.MySQLPreparedStatements, maxPreparedStatements)
	}
	for _, f := range []struct {
		what  string
		files tlsfiles.Files
	}{{"mysql", c.MySQLTLS}, {"redis", c.RedisTLS}, {"nats", c.NATSTLS}} {
		if err := f.files.Validate(f.what); err != nil {
			return err
		}
	}
	if c.Relay.NoGapTracking && c.Relay.Settle <= 0 {
		return fmt.Errorf("relay settle window %s: must be positive when gap tracking is off", c.Relay.Settle)
	}
	if n := c.Relay.EventsPerMessage; n < 0 || n > maxEventsPerMessage { // 0: the default
		return fmt.Errorf("relay events per message %d is outside 1..%d (1: every transfer in a message of its own)", n, maxEventsPerMessage)
	}
	if err := c.HTTP.Validate(); err != nil {
		return err
	}
	if _, err := auth.ParseMode(string(c.Auth)); err != nil {
		return err
	}
	if c.NodeID < 0 || c.NodeID > 1023 {
		return fmt.Errorf("node id %d is outside 0..1023", c.NodeID)
	}
	if c.Node == "" {
		return errors.New("node name is empty")
	}
	if c.Reaper.IdempotencyRetention < 0 {
		return fmt.Errorf("idempotency retention %s is negative: give a positive duration, or 0 to keep keys forever", c.Reaper.IdempotencyRetention)
	}
	if err := c.Reaper.Retention.Validate(); err != nil {
		return err
	}
	if c.EventsMaxAge != 0 && c.EventsMaxAge < bus.EventsMaxAgeMin {
		return fmt.Errorf("events max age %s: give at least %s (JetStream's de-duplication window must fit in it)", c.EventsMaxAge, bus.EventsMaxAgeMin)
	}
	if c.Shards != 0 {
		if err := ring.ValidateShards(c.Shards); err != nil {
			return err
		}
	}
	return nil
}

// Run runs services until ctx ends: it opens the dependencies, builds the
// services, and runs them with the ordered shutdown.
func Run(ctx context.Context, cfg Config, services []Service, logger *slog.Logger) error {
	if err := cfg.Validate(services); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	stopTracing, err := tracing.Setup(ctx, tracing.Config{Endpoint: cfg.OTLPEndpoint, Service: ServiceName(services), Node: cfg.Node}, logger)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	defer func() {
		if err := stopTracing(ctx); err != nil {
			logger.Warn("flushing spans failed", "err", err)
		}
	}()
	d, err := openDeps(ctx, &cfg, logger)
	if err != nil {
		return err
	}
	defer d.close()
	srv, err := listenOps(cfg, d, logger)
	if err != nil {
		return err
	}
	runners, readies, err := buildServices(ctx, cfg, services, d, srv, logger)
	if err != nil {
		return err
	}
	srv.AddCheck("services", allReady(readies))
	return runOrdered(ctx, cfg, services, d, srv, runners, readies, logger)
}

// ServiceName is the service.name of a process's spans: ax-<service> for
// a process running one service, ax for several (ax up).
func ServiceName(services []Service) string {
	if len(services) == 1 {
		return "ax-" + string(services[0])
	}
	return "ax"
}

// deps are the connections and shared parts of one process, used by every
// service it runs.
type deps struct {
	st   *store.Store
	rdb  *redis.Client
	conn *bus.Conn
	clk  *clock.Redis
	keys keys.Keys
	// send is the process's one dispatch.Sender, for the dispatcher, the
	// relay (tasks due the moment they became READY), the timer (READY
	// tasks that fall due), the submitter (the tasks it creates due at
	// once) and the executor (what its outcomes release): one routing
	// table and one type cache.
	send *dispatch.Sender
	// ids names the tasks this process creates (submissions and schedule
	// fires): one generator, so they never collide with each other.
	ids *idgen.Generator
	// authOn says API keys are checked (decided once, at start).
	authOn bool
	// closers release what openDeps opened, last first.
	closers []func()
}

func (d *deps) close() {
	for i := len(d.closers) - 1; i >= 0; i-- {
		d.closers[i]()
	}
}

// openDeps migrates, opens MySQL, decides whether API keys are checked,
// starts the embedded NATS server if asked to, and connects to Redis and
// NATS. On error it closes what it opened.
func openDeps(ctx context.Context, cfg *Config, logger *slog.Logger) (_ *deps, err error) {
	// Not the named result: the error returns below set that to nil.
	d := &deps{keys: keys.New(cfg.RedisPrefix)}
	defer func() {
		if err != nil {
			d.close()
		}
	}()
	dsn, err := mysqlDSN(*cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Migrate {
		if err := store.Migrate(ctx, dsn); err != nil {
			return nil, err
		}
	}
	if d.st, err = store.Open(ctx, dsn, store.Options{Actor: "ax@" + cfg.Node,
		PreparedStatements: cfg.MySQLPreparedStatements, StepsInTable: cfg.WorkflowStepsInTable}); err != nil {
		return nil, err
	}
	d.closers = append(d.closers, func() { d.st.Close() })
	// Decided before anything else starts, so that a process that must not
	// run open stops here and the first line logged says who may call it.
	if d.authOn, err = decideAuth(ctx, *cfg, d.st, logger); err != nil {
		return nil, err
	}
	if err := startEmbeddedNATS(cfg, d, logger); err != nil {
		return nil, err
	}
	if err := connectRedis(ctx, *cfg, d); err != nil {
		return nil, err
	}
	natsOpts, err := natsOptions(*cfg)
	if err != nil {
		return nil, err
	}
	if d.conn, err = bus.Connect(ctx, cfg.NATSURL, "ax-"+cfg.Node, natsOpts...); err != nil {
		return nil, err
	}
	d.closers = append(d.closers, d.conn.Close)
	if err := bus.EnsureStreams(ctx, d.conn.JS, bus.StreamOptions{Replicas: cfg.StreamReplicas, EventsMaxAge: cfg.EventsMaxAge}); err != nil {
		return nil, err
	}
	d.clk = clock.NewRedis(d.rdb, cfg.LocalClock, logger)
	if err := d.clk.Sync(ctx); err != nil {
		return nil, err
	}
	heartbeat := cfg.Dispatcher.Heartbeat
	if heartbeat <= 0 {
		heartbeat = cfg.Executor.HeartbeatInterval
	}
	if d.ids, err = idgen.New(cfg.NodeID); err != nil {
		return nil, err
	}
	d.send = dispatch.New(dispatch.Config{Heartbeat: heartbeat, Shards: cfg.Shards, TypeCacheClock: cfg.TypeCacheClock},
		d.st, d.rdb, d.keys, d.clk, logger.With("component", "dispatch"))
	return d, nil
}

// mysqlDSN is cfg.MySQLDSN set for TLS when the settings ask for it.
func mysqlDSN(cfg Config) (string, error) {
	tlsCfg, err := cfg.MySQLTLS.Config("mysql")
	if err != nil {
		return "", err
	}
	return store.WithTLS(cfg.MySQLDSN, tlsCfg)
}

// connectRedis connects to Redis with the configured user, password and
// TLS, and checks that it answers.
func connectRedis(ctx context.Context, cfg Config, d *deps) error {
	tlsCfg, err := cfg.RedisTLS.Config("redis")
	if err != nil {
		return err
	}
	d.rdb = redis.NewClient(&redis.Options{Addr: cfg.RedisAddr, DB: cfg.RedisDB,
		Username: cfg.RedisUser, Password: cfg.RedisPassword, TLSConfig: tlsCfg})
	d.closers = append(d.closers, func() { d.rdb.Close() })
	if err := d.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ping redis %s: %w", cfg.RedisAddr, err)
	}
	return nil
}

// natsOptions are the NATS connection's credentials and TLS.
func natsOptions(cfg Config) ([]nats.Option, error) {
	var opts []nats.Option
	if cfg.NATSUser != "" {
		// Replies come to the user's own inbox subjects, which its
		// permissions allow and no other user's do (natsperm).
		opts = append(opts, nats.UserInfo(cfg.NATSUser, cfg.NATSPassword),
			nats.CustomInboxPrefix(natsperm.InboxPrefix(cfg.NATSUser)))
	}
	tlsCfg, err := cfg.NATSTLS.Config("nats")
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil {
		opts = append(opts, nats.Secure(tlsCfg))
	}
	return opts, nil
}

// startEmbeddedNATS starts the embedded NATS server when the process has
// no external one (`ax up`) and points cfg.NATSURL at it.
func startEmbeddedNATS(cfg *Config, d *deps, logger *slog.Logger) error {
	if !cfg.EmbeddedNATS || cfg.NATSURL != "" {
		return nil
	}
	if err := os.MkdirAll(cfg.Embedded.StoreDir, 0o755); err != nil {
		return fmt.Errorf("nats store dir: %w", err)
	}
	srv, err := natsembed.Start(cfg.Embedded)
	if err != nil {
		return err
	}
	d.closers = append(d.closers, srv.Shutdown)
	cfg.NATSURL = srv.URL()
	logger.Info("embedded nats started", "url", cfg.NATSURL, "store_dir", cfg.Embedded.StoreDir, "sync", cfg.Embedded.Sync)
	return nil
}

// listenOps binds the HTTP server (API, health, metrics) with a health
// check per connection.
func listenOps(cfg Config, d *deps, logger *slog.Logger) (*ops.Server, error) {
	httpCfg := cfg.HTTP
	if d.authOn && httpCfg.Edge.RateKey == nil {
		// A key's requests share one bucket wherever they come from.
		httpCfg.Edge.RateKey = func(r *http.Request) string {
			if name := auth.KeyName(r.Context()); name != "" {
				return "key:" + name
			}
			return httpedge.RemoteIP(r)
		}
	}
	srv := ops.New(cfg.HTTPAddr, httpCfg, logger)
	srv.AddCheck("mysql", d.st.Ping)
	srv.AddCheck("redis", func(ctx context.Context) error { return d.rdb.Ping(ctx).Err() })
	srv.AddCheck("nats", func(context.Context) error {
		if !d.conn.NC.IsConnected() {
			return errors.New("not connected")
		}
		return nil
	})
	if d.authOn {
		// Key expiry is wall-clock time, like the times the store writes.
		authn := auth.New(cfg.AuthCache, d.st, clock.System{}, logger.With("component", "auth"))
		srv.Use(auth.Middleware(srv.Mux, authn, logger.With("component", "auth")))
	}
	if err := srv.Listen(); err != nil {
		return nil, err
	}
	return srv, nil
}

// buildServices builds the services asked for, in order, and returns
// their Run functions and, for services with consumers, the channels that
// close when they are really taking work.
func buildServices(ctx context.Context, cfg Config, services []Service, d *deps, srv *ops.Server,
	logger *slog.Logger) (runners []func(context.Context) error, readies []<-chan struct{}, err error) {
	for _, s := range services {
		switch s {
		case Submitter:
			run, err := newSubmitter(cfg, d, srv, logger)
			if err != nil {
				return nil, nil, err
			}
			runners = append(runners, run)
		case Timer:
			tcfg := cfg.Timer
			if tcfg.Dispatch == nil {
				tcfg.Dispatch = d.send
			}
			if tcfg.IDs == nil {
				tcfg.IDs, tcfg.Clock = d.ids, d.clk
			}
			tm := timer.New(tcfg, d.st.WithActor("timer@"+cfg.Node), d.rdb, d.keys, d.conn, logger)
			readies = append(readies, tm.Ready())
			runners = append(runners, tm.Run)
		case Dispatcher:
			dcfg := cfg.Dispatcher
			if dcfg.Dispatch == nil {
				dcfg.Dispatch = d.send
			}
			ds := dispatcher.New(dcfg, d.st.WithActor("dispatcher@"+cfg.Node), d.rdb, d.keys, d.conn, d.clk, logger)
			readies = append(readies, ds.Ready())
			runners = append(runners, ds.Run)
		case Executor:
			ex, err := newExecutor(ctx, cfg, d, srv, logger)
			if err != nil {
				return nil, nil, err
			}
			readies = append(readies, ex.Ready())
			runners = append(runners, ex.Run)
		case Reaper:
			rcfg := cfg.Reaper
			if rcfg.RenewInterval <= 0 {
				// The executors of one system renew alike.
				rcfg.RenewInterval = cfg.Executor.RenewInterval
			}
			if rcfg.Shards == 0 {
				rcfg.Shards = cfg.Shards
			}
			rcfg.Retention.Holder = outbox.HolderName(cfg.Node)
			rp := reaper.New(rcfg, d.st.WithActor("reaper@"+cfg.Node), d.rdb, d.keys, d.clk, logger).WithWork(d.conn.JS)
			runners = append(runners, rp.Run, rp.RunRetention)
		}
	}
	return runners, readies, nil
}

func newSubmitter(cfg Config, d *deps, srv *ops.Server, logger *slog.Logger) (func(context.Context) error, error) {
	scfg := cfg.Submitter
	scfg.Node = cfg.Node
	scfg.TypeCacheClock = cfg.TypeCacheClock
	sub := submitter.New(scfg, d.st.WithActor("submitter@"+cfg.Node), d.ids, d.clk, logger)
	sub.ServeNodes(d.rdb, d.keys, cfg.Executor.HeartbeatInterval, cfg.Shards)
	sub.DispatchWith(d.send, d.conn)
	sub.Routes(srv.Mux)
	return sub.Run, nil
}

func newExecutor(ctx context.Context, cfg Config, d *deps, srv *ops.Server, logger *slog.Logger) (*executor.Executor, error) {
	ecfg := cfg.Executor
	ecfg.Node = cfg.Node
	ecfg.Addr = srv.Addr()
	ecfg.TypeCacheClock = cfg.TypeCacheClock
	types := slices.Clone(cfg.Types)
	if cfg.NATSTypes != nil {
		types = append(types, cfg.NATSTypes(d.conn.NC)...)
	}
	if len(types) == 0 {
		return nil, errors.New("executor: no task types to serve: register handlers, give --webhook TYPE=URL, or --builtins for the demonstration types")
	}
	ex, err := executor.New(ecfg, d.st.WithActor("executor@"+cfg.Node), d.rdb, d.keys, d.conn, d.clk, logger, types)
	if err != nil {
		return nil, err
	}
	ex.DispatchWith(d.send, d.conn)
	if err := ex.Register(ctx); err != nil {
		return nil, err
	}
	return ex, nil
}

// allReady is the health check that passes once every service with
// consumers is taking work: every consumer declared and pulled.
func allReady(readies []<-chan struct{}) func(context.Context) error {
	return func(context.Context) error {
		for _, r := range readies {
			select {
			case <-r:
			default:
				return errors.New("starting: consumers not declared yet")
			}
		}
		return nil
	}
}

// runOrdered runs the infrastructure (HTTP server, dispatch routing, relay,
// clock) and the services until ctx ends or a part fails, then shuts down
// in order: the services stop taking work and finish what they hold, then
// the relay flushes the last events and the HTTP server closes.
func runOrdered(ctx context.Context, cfg Config, services []Service, d *deps, srv *ops.Server,
	runners []func(context.Context) error, readies []<-chan struct{}, logger *slog.Logger) error {
	// Infrastructure outlives the services so their last transfers are
	// relayed and /readyz can report draining.
	infraCtx, stopInfra := context.WithCancel(context.WithoutCancel(ctx))
	defer stopInfra()
	infra, infraCtx := errgroup.WithContext(infraCtx)
	infra.Go(func() error { return srv.Run(infraCtx) })
	relayCfg := cfg.Relay
	if relayCfg.Holder == "" {
		relayCfg.Holder = outbox.HolderName(cfg.Node)
	}
	if relayCfg.Dispatch == nil {
		relayCfg.Dispatch = d.send
	}
	infra.Go(func() error { return d.send.Run(infraCtx) })
	infra.Go(func() error { return outbox.New(relayCfg, d.st, d.conn, logger).Run(infraCtx) })
	infra.Go(func() error { return d.clk.Run(infraCtx, time.Second) })

	svcParent, stopServices := context.WithCancel(ctx)
	defer stopServices()
	svc, svcCtx := errgroup.WithContext(svcParent)
	for _, r := range runners {
		svc.Go(func() error { return r(svcCtx) })
	}
	go announceReady(svcCtx, cfg, services, srv, readies, logger)
	// A failing infrastructure part (HTTP server, relay) stops everything.
	go func() {
		select {
		case <-infraCtx.Done():
			if ctx.Err() == nil {
				logger.Error("infrastructure stopped; shutting down services")
			}
			stopServices()
		case <-svcParent.Done():
		}
	}()
	svcErr := svc.Wait()
	srv.SetDraining()
	logger.Info("services stopped; flushing outbox and closing")
	stopInfra()
	infraErr := infra.Wait()
	return errors.Join(svcErr, infraErr)
}

// announceReady logs, and calls cfg.OnReady, once every service is taking
// work.
func announceReady(ctx context.Context, cfg Config, services []Service, srv *ops.Server, readies []<-chan struct{}, logger *slog.Logger) {
	for _, r := range readies {
		select {
		case <-r:
		case <-ctx.Done():
			return
		}
	}
	logger.Info("ax running", "services", services, "http", srv.Addr(), "nats", bus.Redact(cfg.NATSURL), "node", cfg.Node)
	if cfg.OnReady != nil {
		cfg.OnReady(srv.Addr())
	}
}

// decideAuth applies cfg.Auth and logs the decision.
func decideAuth(ctx context.Context, cfg Config, st *store.Store, logger *slog.Logger) (bool, error) {
	mode, err := auth.ParseMode(string(cfg.Auth))
	if err != nil {
		return false, err
	}
	d, err := auth.Decide(ctx, mode, cfg.HTTPAddr, st, time.Now())
	if err != nil {
		return false, err
	}
	if d.Warn {
		logger.Warn(d.Message, "http", cfg.HTTPAddr)
	} else {
		logger.Info(d.Message, "http", cfg.HTTPAddr)
	}
	return d.Enforce, nil
}
