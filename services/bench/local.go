package bench

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
)

// splitServices are the processes of TopologySplit, in start order.
var splitServices = []string{"submitter", "timer", "dispatcher", "executor", "reaper"}

// local is one ax the harness started for one run: a fresh database and
// Redis prefix, a NATS JetStream server, and `ax up` or the five services.
type local struct {
	cfg      *Config
	logger   *slog.Logger
	dir      string
	dbName   string
	rootDSN  string // the MySQL server, no database
	prefix   string
	nats     *child
	services []*child
}

// startLocal starts a fresh ax for one run. label names the run in file
// names; profile makes the ax processes write CPU profiles.
func startLocal(ctx context.Context, cfg *Config, label string, profile bool) (t *target, err error) {
	suffix := randomSuffix()
	l := &local{cfg: cfg, logger: cfg.Logger, prefix: "axbench" + suffix}
	if l.dir, err = os.MkdirTemp("", "ax-bench-"); err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	defer func() {
		if err != nil {
			l.stop()
		}
	}()
	dsn, err := l.createDatabase(ctx, suffix)
	if err != nil {
		return nil, err
	}
	natsURL, err := l.startNATS(ctx)
	if err != nil {
		return nil, err
	}
	if err := l.migrate(ctx, dsn); err != nil {
		return nil, err
	}
	if cfg.seed != nil {
		if err := cfg.seed(ctx, dsn); err != nil {
			return nil, err
		}
	}
	api, err := l.startAx(ctx, dsn, natsURL, label, profile)
	if err != nil {
		return nil, err
	}
	t = &target{api: "http://" + api, natsURL: natsURL, dsn: dsn, stop: l.stop}
	for i, c := range l.services {
		name, group := "ax", ""
		if cfg.Topology == TopologySplit {
			name, group = splitServices[i], "ax"
		}
		t.procs = append(t.procs, procRef{name: name, pid: c.pid(), rss: true, group: group})
	}
	t.procs = append(t.procs, procRef{name: "nats", pid: l.nats.pid(), rss: true})
	t.procs = append(t.procs, infraFor(cfg, func(string) bool { return false })...)
	return t, nil
}

// createDatabase creates <db>_<suffix> on the configured server: a fresh
// database per run, named apart so that runs of other people on the same
// server never meet.
func (l *local) createDatabase(ctx context.Context, suffix string) (string, error) {
	c, err := mysql.ParseDSN(l.cfg.MySQLDSN)
	if err != nil {
		return "", fmt.Errorf("mysql dsn: %w", err)
	}
	base := c.DBName
	if base == "" {
		base = "ax_bench"
	}
	c.DBName = ""
	l.rootDSN = c.FormatDSN()
	name := base + "_" + suffix
	if err := l.exec(ctx, "DROP DATABASE IF EXISTS `"+name+"`", "CREATE DATABASE `"+name+"`"); err != nil {
		return "", err
	}
	l.dbName = name
	c.DBName = name
	return c.FormatDSN(), nil
}

func (l *local) exec(ctx context.Context, stmts ...string) error {
	db, err := sql.Open("mysql", l.rootDSN)
	if err != nil {
		return fmt.Errorf("open mysql: %w", err)
	}
	defer db.Close()
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("mysql %q: %w", s, err)
		}
	}
	return nil
}

// startNATS starts a JetStream server with its store in the run's
// directory and waits until it accepts clients.
func (l *local) startNATS(ctx context.Context) (string, error) {
	port, err := freePort()
	if err != nil {
		return "", err
	}
	l.nats, err = startChild("nats-server", l.dir, l.cfg.NATSServer,
		"-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", filepath.Join(l.dir, "jetstream"))
	if err != nil {
		return "", err
	}
	url := fmt.Sprintf("nats://127.0.0.1:%d", port)
	deadline := time.Now().Add(readyTimeout)
	for {
		if done, err := l.nats.exited(); done {
			return "", fmt.Errorf("nats-server exited during start-up: %v\n%s", err, l.nats.tail())
		}
		if nc, err := nats.Connect(url); err == nil {
			nc.Close()
			return url, nil
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("nats-server not accepting clients on %s within %s\n%s", url, readyTimeout, l.nats.tail())
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// migrate applies the schema with the ax being measured, so the binary's
// own migrations are the ones in force.
func (l *local) migrate(ctx context.Context, dsn string) error {
	c, err := startChild("migrate", l.dir, l.cfg.AxBin, "migrate", "up", "--mysql-dsn", dsn)
	if err != nil {
		return err
	}
	select {
	case <-c.done:
		if c.err != nil {
			return fmt.Errorf("ax migrate up: %w\n%s", c.err, c.tail())
		}
		return nil
	case <-ctx.Done():
		_ = c.stop()
		return ctx.Err()
	}
}

// startAx starts `ax up`, or the five services, with the durable defaults
// and the pool size asked for, one after the other, each waited for on its
// /readyz. It returns the API address.
//
// A port from freePort is free only until it is closed: the services
// already running open connections from the same ephemeral range, and one
// of them may take it before the child binds it. A child that exits
// because its address is in use is started again on another port.
func (l *local) startAx(ctx context.Context, dsn, natsURL, label string, profile bool) (string, error) {
	services := []string{"up"}
	if l.cfg.Topology == TopologySplit {
		services = splitServices
	}
	var api string
	for _, svc := range services {
		for attempt := 1; ; attempt++ {
			port, err := freePort()
			if err != nil {
				return "", err
			}
			addr := "127.0.0.1:" + strconv.Itoa(port)
			args := []string{svc, "--http", addr, "--node", "bench-" + svc,
				"--mysql-dsn", dsn, "--redis-addr", l.cfg.RedisAddr, "--redis-prefix", l.prefix,
				"--nats-url", natsURL, "--concurrency", strconv.Itoa(l.cfg.Concurrency),
				"--log-level", "warn", "--builtins"}
			if svc == "up" {
				args = append(args, "--migrate=false")
			}
			args = append(args, l.cfg.axArgs...)
			if profile {
				args = append(args, "--cpuprofile", filepath.Join(l.cfg.CPUProfileDir, label+"-"+svc+".pprof"))
			}
			args = append(args, l.cfg.AxFlags...)
			c, err := startChild("ax-"+svc, l.dir, l.cfg.AxBin, args...)
			if err != nil {
				return "", err
			}
			l.services = append(l.services, c)
			err = c.waitReady(ctx, addr)
			if err == nil {
				if api == "" {
					api = addr
				}
				break
			}
			if exited, _ := c.exited(); !exited || attempt == 3 || !strings.Contains(c.tail(), "address already in use") {
				return "", err
			}
			l.logger.Info("port taken before the service bound it; starting it again", "service", svc, "addr", addr)
		}
	}
	return api, nil
}

// stop stops ax (SIGTERM, all services at once), then NATS, then drops the
// database and the Redis keys and removes the run's directory. Teardown
// outlives a cancelled run, so it uses its own bounded context.
func (l *local) stop() {
	var wg sync.WaitGroup
	for _, c := range l.services {
		wg.Go(func() {
			if err := c.stop(); err != nil {
				l.logger.Warn("ax did not stop cleanly", "err", err)
			}
		})
	}
	wg.Wait()
	if l.nats != nil {
		if err := l.nats.stop(); err != nil {
			l.logger.Warn("nats-server did not stop cleanly", "err", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if l.dbName != "" {
		if err := l.exec(ctx, "DROP DATABASE IF EXISTS `"+l.dbName+"`"); err != nil {
			l.logger.Warn("drop bench database", "database", l.dbName, "err", err)
		}
	}
	if err := l.deleteKeys(ctx); err != nil {
		l.logger.Warn("delete bench redis keys", "prefix", l.prefix, "err", err)
	}
	_ = os.RemoveAll(l.dir)
}

func (l *local) deleteKeys(ctx context.Context) error {
	rdb := redis.NewClient(&redis.Options{Addr: l.cfg.RedisAddr})
	defer rdb.Close()
	iter := rdb.Scan(ctx, 0, l.prefix+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return err
	}
	for len(keys) > 0 {
		n := min(len(keys), 1000)
		if err := rdb.Del(ctx, keys[:n]...).Err(); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// freePort returns a TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
