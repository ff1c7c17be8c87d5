// Package testenv gives integration tests real, isolated servers: a fresh
// MySQL database per test, a Redis key prefix (or a private redis-server
// process) per test, and an embedded NATS JetStream server per test. When a
// server is missing the test is skipped locally and fails under CI=true.
package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/redis/go-redis/v9"

	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/natsembed"
	"github.com/axsched/ax/services/internal/store"
)

// Settings read from the environment, with the machine defaults.
var (
	mysqlBase = envOr("AX_TEST_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/")
	redisAddr = envOr("AX_TEST_REDIS_ADDR", "127.0.0.1:6379")
)

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Unavailable skips the test, or fails it under CI=true, because a server
// it needs is missing.
func Unavailable(t testing.TB, what string, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s unavailable (CI requires it): %v", what, err)
	}
	t.Skipf("%s unavailable: %v", what, err)
}

// Suffix is a short random identifier for names.
func Suffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// MySQLDSN creates a fresh database with the schema migrated and drops it
// when the test ends. It returns the DSN: the administrative user's, or
// with AX_TEST_MYSQL_GRANTS=dml a user of the test's own that has only the
// services' rights (store.ServicePrivileges), so a package's whole suite
// shows that the services need no more.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	dsn := MigratedDSN(t)
	switch g := os.Getenv("AX_TEST_MYSQL_GRANTS"); g {
	case "", "admin":
		return dsn
	case "dml":
		return MySQLUser(t, dsn, store.ServicePrivileges)
	default:
		t.Fatalf("AX_TEST_MYSQL_GRANTS=%q: want admin or dml", g)
		return ""
	}
}

// MigratedDSN creates a fresh database as the administrative user, migrates
// it, and drops it when the test ends. It returns the administrative DSN.
func MigratedDSN(t testing.TB) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(mysqlBase)
	if err != nil {
		t.Fatalf("AX_TEST_MYSQL_DSN: %v", err)
	}
	cfg.DBName = ""
	root := adminConn(t, cfg)
	name := "axtest_" + Suffix()
	cfg.DBName = name
	dsn := cfg.FormatDSN()
	t.Cleanup(func() {
		_, _ = root.Exec("DROP DATABASE IF EXISTS `" + name + "`")
		root.Close()
	})
	if _, err := root.Exec("CREATE DATABASE `" + name + "` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci"); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	if err := store.Migrate(context.Background(), dsn); err != nil {
		t.Fatalf("migrate %s: %v", name, err)
	}
	return dsn
}

// adminConn connects as the administrative user, skipping (or failing
// under CI) when MySQL is not there.
func adminConn(t testing.TB, cfg *mysql.Config) *sql.DB {
	t.Helper()
	root, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		Unavailable(t, "mysql", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := root.PingContext(ctx); err != nil {
		root.Close()
		Unavailable(t, "mysql", err)
	}
	return root
}

// MySQLUser creates a MySQL user of the test's own (a random name and
// password) with privileges on dsn's database only, drops it when the test
// ends, and returns dsn with that user's credentials.
func MySQLUser(t testing.TB, dsn, privileges string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("parse dsn: %v", err)
	}
	admin := cfg.Clone()
	admin.DBName = ""
	root := adminConn(t, admin)
	defer root.Close()
	user, password := "axuser_"+Suffix(), "pw-"+Suffix()+Suffix()
	account := "'" + user + "'@'%'"
	t.Cleanup(func() {
		if db, err := sql.Open("mysql", admin.FormatDSN()); err == nil {
			_, _ = db.Exec("DROP USER IF EXISTS " + account)
			db.Close()
		}
	})
	for _, q := range []string{
		"CREATE USER " + account + " IDENTIFIED BY '" + password + "'",
		store.GrantStatement(privileges, cfg.DBName, account),
	} {
		if _, err := root.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	cfg.User, cfg.Passwd = user, password
	return cfg.FormatDSN()
}

// AdminDSN is dsn (perhaps a restricted user's) with the administrative
// user's credentials, for tests that change the schema or read server
// tables.
func AdminDSN(t testing.TB, dsn string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		t.Fatalf("parse dsn: %v", err)
	}
	base, err := mysql.ParseDSN(mysqlBase)
	if err != nil {
		t.Fatalf("AX_TEST_MYSQL_DSN: %v", err)
	}
	cfg.User, cfg.Passwd = base.User, base.Passwd
	return cfg.FormatDSN()
}

// Store opens a store on a fresh database.
func Store(t testing.TB) (*store.Store, string) {
	t.Helper()
	return StoreWith(t, store.Options{Actor: "test"})
}

// StoreWith opens a store with opts on a fresh database.
func StoreWith(t testing.TB, opts store.Options) (*store.Store, string) {
	t.Helper()
	dsn := MySQLDSN(t)
	st, err := store.Open(context.Background(), dsn, opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st, dsn
}

// Redis connects to the shared Redis and returns key builders under a
// prefix of the test's own; the keys are deleted when the test ends. With
// AX_TEST_REDIS_ACL=1 the client is an ACL user of the test's own with
// only keys.ACLRules for that prefix, so a package's whole suite shows
// ax needs no more.
func Redis(t testing.TB) (*redis.Client, keys.Keys) {
	t.Helper()
	admin := redis.NewClient(&redis.Options{Addr: redisAddr})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := admin.Ping(ctx).Err(); err != nil {
		admin.Close()
		Unavailable(t, "redis", err)
	}
	k := keys.New("axtest" + Suffix())
	// Registered first so that it runs last, after redisUser's cleanup
	// has used the administrative client.
	t.Cleanup(func() {
		iter := admin.Scan(context.Background(), 0, k.Prefix+":*", 1000).Iterator()
		for iter.Next(context.Background()) {
			admin.Del(context.Background(), iter.Val())
		}
		admin.Close()
	})
	if os.Getenv("AX_TEST_REDIS_ACL") == "1" {
		return redisUser(t, admin, k), k
	}
	return admin, k
}

// redisUser creates an ACL user allowed only ax's rules under k's prefix,
// deleted (with its client closed) when the test ends.
func redisUser(t testing.TB, admin *redis.Client, k keys.Keys) *redis.Client {
	t.Helper()
	user, password := "axtest-"+Suffix(), "pw-"+Suffix()+Suffix()
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">" + password}
	for _, r := range k.ACLRules() {
		args = append(args, r)
	}
	if err := admin.Do(context.Background(), args...).Err(); err != nil {
		t.Fatalf("redis acl user: %v", err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr, Username: user, Password: password})
	t.Cleanup(func() {
		rdb.Close()
		admin.Do(context.Background(), "ACL", "DELUSER", user)
	})
	return rdb
}

// RedisServer is a private redis-server process a test may flush, kill and
// restart without disturbing other tests.
type RedisServer struct {
	Addr string
	t    testing.TB
	cmd  *exec.Cmd
	port int
	// tls, when set, serves TLS only (StartRedisTLS).
	tls *TLSFiles
}

// StartRedis starts a private redis-server on a free port.
func StartRedis(t testing.TB) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		Unavailable(t, "redis-server binary", err)
	}
	port := FreePort(t)
	s := &RedisServer{Addr: "127.0.0.1:" + strconv.Itoa(port), t: t, port: port}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// StartRedisTLS starts a private redis-server that serves only TLS with
// the files' server certificate and requires a client certificate.
func StartRedisTLS(t testing.TB, files TLSFiles) *RedisServer {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		Unavailable(t, "redis-server binary", err)
	}
	port := FreePort(t)
	s := &RedisServer{Addr: "127.0.0.1:" + strconv.Itoa(port), t: t, port: port, tls: &files}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Start (re)starts the server process and waits until it answers.
func (s *RedisServer) Start() {
	s.t.Helper()
	args := []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no"}
	opts := &redis.Options{Addr: s.Addr}
	if s.tls != nil {
		args = append(args, "--port", "0", "--tls-port", strconv.Itoa(s.port), "--tls-cert-file", s.tls.ServerCert,
			"--tls-key-file", s.tls.ServerKey, "--tls-ca-cert-file", s.tls.CA, "--tls-auth-clients", "yes")
		opts.TLSConfig = s.tls.clientTLS(s.t)
	}
	s.cmd = exec.Command("redis-server", args...)
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("start redis-server: %v", err)
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if rdb.Ping(context.Background()).Err() == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.t.Fatalf("redis-server on %s did not answer within 10s", s.Addr)
}

// Stop kills the server process (its data is gone: nothing is persisted).
func (s *RedisServer) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
		_ = s.cmd.Wait()
		s.cmd = nil
	}
}

// NATS starts an embedded JetStream server with its own store directory
// and returns a connection with ax's streams declared.
func NATS(t testing.TB) *bus.Conn {
	t.Helper()
	_, conn := NATSServer(t)
	return conn
}

// NATSHost is an embedded NATS server that a test can stop, and start
// again on the same address and store.
type NATSHost struct {
	*natsembed.Server
	cfg natsembed.Config
}

// Restart stops the server (if it runs) and starts it again; clients
// reconnect by themselves.
func (h *NATSHost) Restart(t testing.TB) {
	t.Helper()
	h.RestartWith(t, func(*natsembed.Config) {})
}

// RestartWith is Restart with the server's configuration changed by
// change (its address and store stay).
func (h *NATSHost) RestartWith(t testing.TB, change func(*natsembed.Config)) {
	t.Helper()
	change(&h.cfg)
	h.Shutdown()
	srv, err := natsembed.Start(h.cfg)
	if err != nil {
		t.Fatalf("restart embedded nats: %v", err)
	}
	h.Server = srv
}

// NATSServer is NATS, with the server, for tests that stop or restart it.
func NATSServer(t testing.TB) (*NATSHost, *bus.Conn) {
	t.Helper()
	return NATSServerWith(t, natsembed.Config{})
}

// NATSServerWith is NATSServer with the server configured as cfg says
// beyond its address and store (which it picks).
func NATSServerWith(t testing.TB, cfg natsembed.Config) (*NATSHost, *bus.Conn) {
	t.Helper()
	cfg.Listen, cfg.StoreDir = fmt.Sprintf("127.0.0.1:%d", FreePort(t)), filepath.Join(t.TempDir(), "js")
	h := &NATSHost{cfg: cfg}
	var err error
	if h.Server, err = natsembed.Start(h.cfg); err != nil {
		t.Fatalf("embedded nats: %v", err)
	}
	t.Cleanup(func() { h.Shutdown() })
	conn, err := bus.Connect(context.Background(), h.URL(), "test")
	if err != nil {
		t.Fatalf("connect nats: %v", err)
	}
	t.Cleanup(conn.Close)
	if err := bus.EnsureStreams(context.Background(), conn.JS, bus.StreamOptions{}); err != nil {
		t.Fatalf("streams: %v", err)
	}
	return h, conn
}

// Column runs query and returns its single column, row by row.
func Column[T any](t testing.TB, db *sql.DB, query string, args ...any) []T {
	t.Helper()
	rows, err := db.Query(query, args...)
	if err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(&v); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return out
}

// FreePort returns a TCP port that was free a moment ago.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Logger logs to the test's output at warn level and above (debug with
// AX_TEST_LOG=debug).
func Logger(t testing.TB) *slog.Logger {
	level := slog.LevelWarn
	if strings.EqualFold(os.Getenv("AX_TEST_LOG"), "debug") {
		level = slog.LevelDebug
	}
	w := &testWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// testWriter drops lines written after the test finished, which the testing
// package would otherwise turn into a panic.
type testWriter struct {
	t    testing.TB
	done atomic.Bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// Eventually polls cond every 20 ms until it returns true or timeout passes.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s", timeout, what)
}

// Must fails the test on err.
func Must(t testing.TB, err error, format string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(format, args...), err)
	}
}

// DrainDispatches takes every message on AX_WORK's subjects matching
// filter, as DrainWork does, and returns the dispatches they carry, one per
// task (a message may carry several: events.TaskDispatches), with the
// subject each came on.
func DrainDispatches(t testing.TB, conn *bus.Conn, filter string) []SubjectDispatch {
	t.Helper()
	var out []SubjectDispatch
	for _, m := range DrainWork(t, conn, filter) {
		ds, err := bus.Dispatches(m, nil)
		if err != nil {
			t.Fatalf("decode dispatch on %s: %v", m.Subject(), err)
		}
		for _, d := range ds {
			out = append(out, SubjectDispatch{Subject: m.Subject(), Task: d.Task})
		}
	}
	return out
}

// SubjectDispatch is one task's dispatch and the subject it came on.
type SubjectDispatch struct {
	Subject string
	Task    events.TaskDispatched
}

// DrainWork takes every message on AX_WORK's subjects matching filter
// (through a durable consumer of its own per filter), acknowledging each,
// until a fetch finds nothing for 300 ms.
func DrainWork(t testing.TB, conn *bus.Conn, filter string) []jetstream.Msg {
	t.Helper()
	ctx := context.Background()
	durable := "test_" + strings.NewReplacer(".", "_", "*", "star", ">", "all").Replace(filter)
	c, err := conn.JS.CreateOrUpdateConsumer(ctx, events.StreamWork, jetstream.ConsumerConfig{
		Durable: durable, FilterSubject: filter, AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatalf("work consumer: %v", err)
	}
	var got []jetstream.Msg
	for {
		batch, err := c.Fetch(100, jetstream.FetchMaxWait(300*time.Millisecond))
		if err != nil {
			t.Fatalf("fetch work: %v", err)
		}
		n := 0
		for m := range batch.Messages() {
			if err := m.Ack(); err != nil {
				t.Fatalf("ack work: %v", err)
			}
			got = append(got, m)
			n++
		}
		if n == 0 {
			return got
		}
	}
}

// StreamEvent is one event read back from AX_EVENTS: a transfer, alone in
// its message or one of several (events.TaskTransfers), or another event.
type StreamEvent struct {
	// ID is the event ID: a transfer's event_id, else the message's
	// Nats-Msg-Id.
	ID string
	// TaskID is a transfer's task; else the message's correlation_id.
	TaskID  string
	Subject string
	// Transfer is the transfer, for a transfer.
	Transfer *events.TaskTransferred
	// MsgID is the Nats-Msg-Id of the message that carried it.
	MsgID string
}

// StreamEvents reads every message on AX_EVENTS, in stream order, and
// returns the events they carry, in order.
func StreamEvents(t testing.TB, js jetstream.JetStream) []StreamEvent {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, events.StreamEvents)
	Must(t, err, "events stream")
	info, err := s.Info(ctx)
	Must(t, err, "events stream info")
	var out []StreamEvent
	if info.State.Msgs == 0 {
		return out
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{})
	Must(t, err, "events consumer")
	for seen := uint64(0); seen < info.State.Msgs; {
		batch, err := c.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		Must(t, err, "fetch events")
		n := 0
		for m := range batch.Messages() {
			n++
			out = append(out, MsgEvents(t, m)...)
		}
		if n == 0 {
			break
		}
		seen += uint64(n)
	}
	return out
}

// MsgEvents returns the events one message of AX_EVENTS carries.
func MsgEvents(t testing.TB, m jetstream.Msg) []StreamEvent {
	t.Helper()
	h := m.Headers()
	msgID, typ := h.Get(events.HeaderMsgID), h.Get(events.HeaderEventType)
	if typ != events.TypeTaskTransferred && typ != events.TypeTaskTransfers {
		return []StreamEvent{{ID: msgID, TaskID: h.Get(events.HeaderCorrelationID), Subject: m.Subject(), MsgID: msgID}}
	}
	trs, err := events.ReadTransfers[events.TaskTransferred](typ, m.Data(), nil)
	Must(t, err, "decode the transfers of %s", m.Subject())
	out := make([]StreamEvent, len(trs))
	for i := range trs {
		out[i] = StreamEvent{ID: trs[i].EventID, TaskID: strconv.FormatInt(trs[i].TaskID, 10), Subject: m.Subject(),
			Transfer: &trs[i], MsgID: msgID}
	}
	return out
}
