// Package worker is how a business team runs its own executor: register
// handlers on an executor.Mux and call Run. Everything else — leases,
// fencing, retries, pools, heartbeats, graceful shutdown — is ax's.
package worker

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"os"

	"github.com/axsched/ax/services/app"
	"github.com/axsched/ax/services/executor"
	"github.com/axsched/ax/services/internal/membership"
	"github.com/axsched/ax/services/internal/tlsfiles"
)

// Config locates ax's servers. Empty fields take ax's documented defaults.
type Config struct {
	// MySQLDSN defaults to root@tcp(127.0.0.1:3306)/ax.
	MySQLDSN string
	// RedisAddr defaults to 127.0.0.1:6379.
	RedisAddr string
	// NATSURL is required: the NATS server the scheduler uses.
	NATSURL string
	// HTTPAddr serves /livez, /readyz and /metrics; default 127.0.0.1:8083.
	HTTPAddr string
	// Node names this worker in task history; default
	// <hostname>-<pid>-<random>, a new name every start (membership.DefaultName).
	Node string
	// VersionLabel is the version this worker reports (GET /v1/nodes) and
	// records on the tasks it runs, for gray releases (docs/rollout.md);
	// default AX_EXECUTOR_VERSION, else the build's. It sets
	// Executor.VersionLabel.
	VersionLabel string
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Executor tunes leases, fetchers and shutdown; zero values are defaults.
	Executor executor.Config

	// Least privilege (docs/security.md): a Redis ACL user, the NATS user
	// of executors (ax-executor), and TLS to each server. Read passwords
	// from the environment or files, never from flags.
	RedisUser, RedisPassword string
	NATSUser, NATSPassword   string
	MySQLTLS, RedisTLS       TLSFiles
	NATSTLS                  TLSFiles
}

// TLSFiles name the PEM files of a TLS connection: CA verifies the server,
// Cert and Key (both or neither) are a client certificate.
type TLSFiles = tlsfiles.Files

// Run serves the mux's task types until ctx ends, then finishes running
// tasks (up to the shutdown timeout) and returns. It never migrates: the
// schema is `ax migrate up`'s, and a worker on an older one refuses to
// start.
func Run(ctx context.Context, cfg Config, mux *executor.Mux) error {
	if mux == nil || len(mux.Specs()) == 0 {
		return errors.New("worker: the mux has no task types")
	}
	if cfg.NATSURL == "" {
		return errors.New("worker: NATSURL is required")
	}
	if cfg.MySQLDSN == "" {
		cfg.MySQLDSN = "root@tcp(127.0.0.1:3306)/ax"
	}
	if cfg.RedisAddr == "" {
		cfg.RedisAddr = "127.0.0.1:6379"
	}
	if cfg.HTTPAddr == "" {
		cfg.HTTPAddr = "127.0.0.1:8083"
	}
	if cfg.Node == "" {
		cfg.Node = membership.DefaultName()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.VersionLabel == "" {
		cfg.VersionLabel = os.Getenv("AX_EXECUTOR_VERSION")
	}
	if cfg.VersionLabel != "" {
		cfg.Executor.VersionLabel = cfg.VersionLabel
	}
	return app.Run(ctx, app.Config{
		MySQLDSN: cfg.MySQLDSN, RedisAddr: cfg.RedisAddr, RedisPrefix: "ax", NATSURL: cfg.NATSURL,
		HTTPAddr: cfg.HTTPAddr, Node: cfg.Node, NodeID: rand.Int64N(1024),
		Executor: cfg.Executor, Types: mux.Specs(),
		RedisUser: cfg.RedisUser, RedisPassword: cfg.RedisPassword, NATSUser: cfg.NATSUser, NATSPassword: cfg.NATSPassword,
		MySQLTLS: cfg.MySQLTLS, RedisTLS: cfg.RedisTLS, NATSTLS: cfg.NATSTLS,
	}, []app.Service{app.Executor}, cfg.Logger)
}
