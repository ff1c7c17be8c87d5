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
	"github.com/axsched/ax/services/internal/idgen"
	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/natsembed"
	"github.com/axsched/ax/services/internal/ops"
	"github.com/axsched/ax/services/internal/outbox"
	"github.com/axsched/ax/services/internal/ring"
	"github.com/axsched/ax/services/internal/store"
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

// AllServices lists the services in start order.
var AllServices = []Service{Submitter, Timer, Dispatcher, Executor, Reaper}

// Config is everything a process needs. Defaults are documented on the
// flags in cmd/ax and in docs/operations.md.
type Config struct {
	MySQLDSN    string
	RedisAddr   string
	RedisDB     int
	RedisPrefix string
	// NATSURL is the NATS server to use; empty with EmbeddedNATS starts one.
	NATSURL      string
	EmbeddedNATS bool
	Embedded     natsembed.Config
	// StreamReplicas is the JetStream replication factor.
	StreamReplicas int
	HTTPAddr       string
	// Node names this process in history rows, locks and task rows.
	Node string
	// Shards is the shard count of every task type's ring (0: 64). Every
	// dispatcher and submitter of a cluster must use the same.
	Shards int
	// NodeID is the snowflake node ID (0..1023) of this submitter.
	NodeID int64
	// Migrate applies pending migrations at start.
	Migrate bool
	// Auth says whether API keys are checked (auth.Mode; "" is auto: on
	// unless HTTPAddr is loopback and no key exists, and a process bound
	// beyond loopback with no key refuses to start).
	Auth auth.Mode
	// AuthCache tunes how long looked-up keys are trusted.
	AuthCache auth.Config

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
	if c.Shards != 0 {
		if err := ring.ValidateShards(c.Shards); err != nil {
			return err
		}
	}
	return nil
}

// Run runs services until ctx ends.
func Run(ctx context.Context, cfg Config, services []Service, logger *slog.Logger) error {
	if err := cfg.Validate(services); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if cfg.Migrate {
		if err := store.Migrate(ctx, cfg.MySQLDSN); err != nil {
			return err
		}
	}
	st, err := store.Open(ctx, cfg.MySQLDSN, store.Options{Actor: "ax@" + cfg.Node})
	if err != nil {
		return err
	}
	defer st.Close()
	// Decided before anything else starts, so that a process that must not
	// run open stops here and the first line logged says who may call it.
	authOn, err := decideAuth(ctx, cfg, st, logger)
	if err != nil {
		return err
	}
	if cfg.EmbeddedNATS && cfg.NATSURL == "" {
		if err := os.MkdirAll(cfg.Embedded.StoreDir, 0o755); err != nil {
			return fmt.Errorf("nats store dir: %w", err)
		}
		srv, err := natsembed.Start(cfg.Embedded)
		if err != nil {
			return err
		}
		defer srv.Shutdown()
		cfg.NATSURL = srv.URL()
		logger.Info("embedded nats started", "url", cfg.NATSURL, "store_dir", cfg.Embedded.StoreDir, "sync", cfg.Embedded.Sync)
	}
	rdb := redis.NewClient(&redis.Options{Addr: cfg.RedisAddr, DB: cfg.RedisDB})
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ping redis %s: %w", cfg.RedisAddr, err)
	}
	conn, err := bus.Connect(ctx, cfg.NATSURL, "ax-"+cfg.Node)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := bus.EnsureStreams(ctx, conn.JS, bus.StreamOptions{Replicas: cfg.StreamReplicas}); err != nil {
		return err
	}
	clk := clock.NewRedis(rdb, cfg.LocalClock, logger)
	if err := clk.Sync(ctx); err != nil {
		return err
	}
	k := keys.New(cfg.RedisPrefix)
	// One dispatch.Sender per process, for the dispatcher, the relay (tasks
	// due the moment they became READY) and the timer (READY tasks that fall
	// due): one routing table and one type cache.
	heartbeat := cfg.Dispatcher.Heartbeat
	if heartbeat <= 0 {
		heartbeat = cfg.Executor.HeartbeatInterval
	}
	send := dispatch.New(dispatch.Config{Heartbeat: heartbeat, Shards: cfg.Shards}, st, rdb, k, clk,
		logger.With("component", "dispatch"))
	srv := ops.New(cfg.HTTPAddr, logger)
	srv.AddCheck("mysql", st.Ping)
	srv.AddCheck("redis", func(ctx context.Context) error { return rdb.Ping(ctx).Err() })
	srv.AddCheck("nats", func(context.Context) error {
		if !conn.NC.IsConnected() {
			return errors.New("not connected")
		}
		return nil
	})
	if authOn {
		// Key expiry is wall-clock time, like the times the store writes.
		authn := auth.New(cfg.AuthCache, st, clock.System{}, logger.With("component", "auth"))
		srv.Use(auth.Middleware(srv.Mux, authn, logger.With("component", "auth")))
	}
	if err := srv.Listen(); err != nil {
		return err
	}

	var runners []func(context.Context) error
	// Services with consumers say when they are really taking work.
	var readies []<-chan struct{}
	for _, s := range services {
		switch s {
		case Submitter:
			ids, err := idgen.New(cfg.NodeID)
			if err != nil {
				return err
			}
			scfg := cfg.Submitter
			scfg.Node = cfg.Node
			sub := submitter.New(scfg, st.WithActor("submitter@"+cfg.Node), ids, clk, logger)
			sub.ServeNodes(rdb, k, cfg.Executor.HeartbeatInterval, cfg.Shards)
			sub.Routes(srv.Mux)
			runners = append(runners, sub.Run)
		case Timer:
			tcfg := cfg.Timer
			if tcfg.Dispatch == nil {
				tcfg.Dispatch = send
			}
			tm := timer.New(tcfg, st.WithActor("timer@"+cfg.Node), rdb, k, conn, logger)
			readies = append(readies, tm.Ready())
			runners = append(runners, tm.Run)
		case Dispatcher:
			dcfg := cfg.Dispatcher
			if dcfg.Dispatch == nil {
				dcfg.Dispatch = send
			}
			d := dispatcher.New(dcfg, st.WithActor("dispatcher@"+cfg.Node), rdb, k, conn, clk, logger)
			readies = append(readies, d.Ready())
			runners = append(runners, d.Run)
		case Executor:
			ecfg := cfg.Executor
			ecfg.Node = cfg.Node
			ecfg.Addr = srv.Addr()
			types := slices.Clone(cfg.Types)
			if cfg.NATSTypes != nil {
				types = append(types, cfg.NATSTypes(conn.NC)...)
			}
			if len(types) == 0 {
				return errors.New("executor: no task types to serve: register handlers, give --webhook TYPE=URL, or --builtins for the demonstration types")
			}
			ex, err := executor.New(ecfg, st.WithActor("executor@"+cfg.Node), rdb, k, conn, clk, logger, types)
			if err != nil {
				return err
			}
			if err := ex.Register(ctx); err != nil {
				return err
			}
			readies = append(readies, ex.Ready())
			runners = append(runners, ex.Run)
		case Reaper:
			runners = append(runners, reaper.New(cfg.Reaper, st.WithActor("reaper@"+cfg.Node), rdb, k, clk, logger).WithWork(conn.JS).Run)
		}
	}

	// Ready means taking work: every consumer declared and pulled.
	srv.AddCheck("services", func(context.Context) error {
		for _, r := range readies {
			select {
			case <-r:
			default:
				return errors.New("starting: consumers not declared yet")
			}
		}
		return nil
	})

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
		relayCfg.Dispatch = send
	}
	infra.Go(func() error { return send.Run(infraCtx) })
	infra.Go(func() error { return outbox.New(relayCfg, st, conn, logger).Run(infraCtx) })
	infra.Go(func() error { return clk.Run(infraCtx, time.Second) })

	svcParent, stopServices := context.WithCancel(ctx)
	defer stopServices()
	svc, svcCtx := errgroup.WithContext(svcParent)
	for _, r := range runners {
		svc.Go(func() error { return r(svcCtx) })
	}
	go func() {
		for _, r := range readies {
			select {
			case <-r:
			case <-svcCtx.Done():
				return
			}
		}
		logger.Info("ax running", "services", services, "http", srv.Addr(), "nats", cfg.NATSURL, "node", cfg.Node)
		if cfg.OnReady != nil {
			cfg.OnReady(srv.Addr())
		}
	}()
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
