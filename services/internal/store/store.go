// Package store is ax's one bounded home for SQL. Every service reads and
// changes tasks through it, and every state change goes through Transfer (or
// CreateTask for a task's first state), which writes the task row, its
// history row in one transaction; the relay publishes the history row's
// event after commit (RelayHistory).
package store

import (
	"context"
	"crypto/tls"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Store wraps the MySQL connection pool. It is safe for concurrent use.
type Store struct {
	db *sql.DB
	// onceDB is the pool Once holds connections of while side effects
	// run (SizeOncePool), so that handlers' effects never wait for, or
	// keep, the connections ax's own statements need.
	onceDB *sql.DB
	now    func() time.Time
	wake   chan struct{}
	// outboxWritten is set by commits that wrote outbox rows (not history),
	// so the relay looks at the outbox only when there is something in it.
	outboxWritten *atomic.Bool
	actor         string
	// stepsInTable: Options.StepsInTable.
	stepsInTable bool
}

// Options configure a Store.
type Options struct {
	// Actor names who writes history rows through this store, e.g.
	// "executor@host-1234". Callers may override it per transfer.
	Actor string
	// Now is the clock used for history timestamps; defaults to time.Now.
	Now func() time.Time
	// MaxOpenConns bounds the pool of ax's own statements; defaults to
	// 32. Once has a pool of its own (SizeOncePool).
	MaxOpenConns int
	// PreparedStatements bounds the statements the process keeps prepared
	// on its connections (preparingConnector), Once's included: 0 takes
	// DefaultPreparedStatements, a negative value keeps none (every
	// statement is sent interpolated).
	PreparedStatements int
	// StepsInTable lists the steps of every workflow this store creates
	// in workflow_steps, as builds before migration 0021 do, instead of
	// on the row of a workflow without compensations: while such builds
	// run beside this one (they would not find the steps of the
	// others). Either kind is read whatever it says.
	StepsInTable bool
}

// DefaultPreparedStatements is Options.PreparedStatements' default: the
// hot statements of a busy process in all their sizes, with room to spare,
// and 16 such processes within MySQL's default max_prepared_stmt_count
// (16,382).
const DefaultPreparedStatements = 1000

// Open connects to MySQL with the settings ax relies on (strict SQL mode,
// UTC, parsed times) and checks that the schema is one this build runs on
// (CheckSchema). It never creates or changes anything: that is `ax migrate
// up`'s, so the services can run as a user without DDL rights.
func Open(ctx context.Context, dsn string, opts Options) (*Store, error) {
	cfg, err := ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	inner, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql connector: %w", err)
	}
	if opts.PreparedStatements == 0 {
		opts.PreparedStatements = DefaultPreparedStatements
	}
	connector := newPreparingConnector(inner, opts.PreparedStatements)
	db := sql.OpenDB(connector)
	if opts.MaxOpenConns <= 0 {
		opts.MaxOpenConns = 32
	}
	db.SetMaxOpenConns(opts.MaxOpenConns)
	db.SetMaxIdleConns(opts.MaxOpenConns)
	db.SetConnMaxLifetime(30 * time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1049 {
			return nil, fmt.Errorf("%w: database %s does not exist on %s: run `ax migrate up` first", ErrSchema, cfg.DBName, cfg.Addr)
		}
		return nil, fmt.Errorf("ping mysql %s: %w", cfg.Addr, err)
	}
	if err := CheckSchema(ctx, db, cfg.DBName); err != nil {
		db.Close()
		return nil, err
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	// Opened lazily: a process whose handlers never call Once never
	// connects it.
	onceDB := sql.OpenDB(connector)
	onceDB.SetConnMaxLifetime(30 * time.Minute)
	onceDB.SetConnMaxIdleTime(time.Minute)
	s := &Store{db: db, onceDB: onceDB, now: opts.Now, wake: make(chan struct{}, 1), outboxWritten: new(atomic.Bool), actor: opts.Actor,
		stepsInTable: opts.StepsInTable}
	// As large as the main pool until an executor sizes it to its slots.
	s.SizeOncePool(opts.MaxOpenConns)
	return s, nil
}

// SizeOncePool bounds the connections Once may hold at a time. Each call
// holds one, with its transaction open, for as long as its side effect
// runs (Once explains why), and a handler runs its effects one after the
// other, so an executor sizes the pool to its handler slots (the sum of
// its types' concurrency): then no effect waits for a connection another
// handler's effect holds, and none takes a connection from the claims,
// heartbeats and outcomes on the main pool.
func (s *Store) SizeOncePool(n int) {
	n = max(n, 1)
	s.onceDB.SetMaxOpenConns(n)
	s.onceDB.SetMaxIdleConns(n)
}

// OncePoolSize is the bound SizeOncePool set last.
func (s *Store) OncePoolSize() int { return s.onceDB.Stats().MaxOpenConnections }

// Network timeouts ParseDSN gives a DSN that sets none (the driver's own
// default is to wait forever). They are a backstop under the context
// deadlines of ax's background loops: a statement on a connection to a
// server that froze (SIGSTOP, a hung disk, a partition that drops packets
// rather than refusing them) fails after ReadTimeoutDefault instead of
// holding its goroutine, and the connection, for good.
const (
	// DialTimeoutDefault bounds connecting (the DSN's timeout).
	DialTimeoutDefault = 10 * time.Second
	// ReadTimeoutDefault bounds waiting for one reply packet
	// (readTimeout). It is longer than InnoDB's default lock wait (50 s),
	// so a statement waiting for a row lock fails with MySQL's own lock
	// wait error rather than a broken connection.
	ReadTimeoutDefault = 60 * time.Second
	// WriteTimeoutDefault bounds sending one packet (writeTimeout).
	WriteTimeoutDefault = 30 * time.Second
)

// ParseDSN parses a go-sql-driver DSN and forces the session settings ax's
// SQL assumes, whatever the operator passed. The network timeouts the
// operator left out get their defaults (DialTimeoutDefault and the
// others); the ones given are kept.
func ParseDSN(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse mysql dsn: %w", err)
	}
	if cfg.DBName == "" {
		// Not the DSN itself: it may hold a password.
		return nil, fmt.Errorf("mysql dsn for %s@%s names no database", cfg.User, cfg.Addr)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DialTimeoutDefault
	}
	if cfg.ReadTimeout <= 0 {
		cfg.ReadTimeout = ReadTimeoutDefault
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = WriteTimeoutDefault
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.InterpolateParams = true
	// One statement per query: the pool never needs multi-statement
	// packets (only migrations do, on a connection of their own).
	cfg.MultiStatements = false
	// Rows affected = rows matched, so an UPDATE that sets a value it
	// already had (a heartbeat within the same millisecond) still counts.
	cfg.ClientFoundRows = true
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["sql_mode"] = "'STRICT_ALL_TABLES,NO_ZERO_DATE,NO_ZERO_IN_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'"
	cfg.Params["time_zone"] = "'+00:00'"
	return cfg, nil
}

// WithActor returns a view of the store that records actor in history rows;
// it shares the pool and the relay wake-up with s.
func (s *Store) WithActor(actor string) *Store {
	c := *s
	c.actor = actor
	return &c
}

// DB exposes the pool for health checks and tests.
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the pools.
func (s *Store) Close() error { return errors.Join(s.db.Close(), s.onceDB.Close()) }

// Ping reports whether MySQL answers.
func (s *Store) Ping(ctx context.Context) error { return s.db.PingContext(ctx) }

// Wake delivers a signal after every commit that wrote history or outbox
// rows, so the relay publishes at once instead of waiting for its poll
// interval.
func (s *Store) Wake() <-chan struct{} { return s.wake }

// OutboxWritten reports, and clears, whether a commit wrote outbox rows
// since the last call.
func (s *Store) OutboxWritten() bool { return s.outboxWritten.Swap(false) }

func (s *Store) notifyOutbox() {
	s.outboxWritten.Store(true)
	s.notify()
}

func (s *Store) notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// IsDeadlock reports whether err is InnoDB choosing this transaction as a
// deadlock victim (or a lock wait timeout): nothing was written and the
// whole transaction may simply be retried.
func IsDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

func isDuplicateKey(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1062
}

// tlsConfigs numbers the TLS configurations WithTLS registers.
var tlsConfigs atomic.Int64

// WithTLS returns dsn set to connect over TLS with cfg (nil: dsn as it
// is). The driver looks TLS configurations up by name, so cfg is
// registered under a name of its own; the returned DSN works for Open,
// Migrate and Status alike.
func WithTLS(dsn string, cfg *tls.Config) (string, error) {
	if cfg == nil {
		return dsn, nil
	}
	parsed, err := mysql.ParseDSN(dsn)
	if err != nil {
		return "", fmt.Errorf("parse mysql dsn: %w", err)
	}
	name := fmt.Sprintf("ax-%d", tlsConfigs.Add(1))
	if cfg.ServerName == "" {
		cfg = cfg.Clone()
		host, _, splitErr := net.SplitHostPort(parsed.Addr)
		if splitErr != nil {
			host = parsed.Addr
		}
		cfg.ServerName = host
	}
	if err := mysql.RegisterTLSConfig(name, cfg); err != nil {
		return "", fmt.Errorf("mysql tls: %w", err)
	}
	parsed.TLSConfig = name
	return parsed.FormatDSN(), nil
}
