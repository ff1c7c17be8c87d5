package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/axsched/ax/services/internal/store"
)

// MariaDB is a private mariadbd process of one test, in a temporary
// directory on a free port, that the test may configure, freeze and thaw
// (SIGSTOP, SIGCONT) without touching the machine's shared server.
type MariaDB struct {
	// Port is its TCP port on 127.0.0.1.
	Port int
	// DSN names the server over TCP as root (no password, no database).
	DSN string
	// SocketDSN reaches it as root over its Unix socket (no database),
	// which counts as a secure transport even when TCP requires TLS.
	SocketDSN string

	t   testing.TB
	cmd *exec.Cmd
}

// StartMariaDB initialises a data directory and starts mariadbd on a free
// port with args added (e.g. --ssl-cert=...); the server is killed when the
// test ends. It needs mariadb-install-db and mariadbd.
func StartMariaDB(t testing.TB, args ...string) *MariaDB {
	t.Helper()
	for _, b := range []string{"mariadb-install-db", "mariadbd"} {
		if _, err := exec.LookPath(b); err != nil {
			Unavailable(t, b, err)
		}
	}
	dir := t.TempDir()
	data, sock := filepath.Join(dir, "data"), filepath.Join(dir, "mysql.sock")
	out, err := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+data, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	port := FreePort(t)
	m := &MariaDB{Port: port, DSN: fmt.Sprintf("root@tcp(127.0.0.1:%d)/", port),
		SocketDSN: "root@unix(" + sock + ")/", t: t}
	m.cmd = exec.Command("mariadbd", append([]string{"--no-defaults", "--datadir=" + data,
		"--port=" + strconv.Itoa(port), "--bind-address=127.0.0.1", "--socket=" + sock, "--user=root",
		"--skip-log-bin", "--innodb-buffer-pool-size=64M", "--max-connections=300",
		"--log-error=" + filepath.Join(dir, "error.log")}, args...)...)
	// Its own process group: signals meant for the test never reach it.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := m.cmd.Start(); err != nil {
		t.Fatalf("start mariadbd: %v", err)
	}
	t.Cleanup(func() {
		_ = m.cmd.Process.Signal(syscall.SIGCONT)
		_ = m.cmd.Process.Kill()
		_ = m.cmd.Wait()
	})
	db, err := sql.Open("mysql", m.SocketDSN)
	if err != nil {
		t.Fatalf("open mariadb: %v", err)
	}
	defer db.Close()
	Eventually(t, 60*time.Second, "private mariadbd answering", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		return db.PingContext(ctx) == nil
	})
	return m
}

// Exec runs statements as root over the socket.
func (m *MariaDB) Exec(t testing.TB, statements ...string) {
	t.Helper()
	db, err := sql.Open("mysql", m.SocketDSN)
	if err != nil {
		t.Fatalf("open mariadb: %v", err)
	}
	defer db.Close()
	for _, q := range statements {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// TCPDSN is the DSN of user with password on database over TCP.
func (m *MariaDB) TCPDSN(user, password, database string) string {
	return fmt.Sprintf("%s:%s@tcp(127.0.0.1:%d)/%s", user, password, m.Port, database)
}

// Database creates database name with ax's schema and returns its DSN
// (root over TCP).
func (m *MariaDB) Database(name string) string {
	m.t.Helper()
	dsn := m.DSN + name
	if err := store.Migrate(context.Background(), dsn); err != nil {
		m.t.Fatalf("migrate %s on the private mariadb: %v", name, err)
	}
	return dsn
}

// Freeze stops the server process (SIGSTOP): connections stay open and
// new ones are accepted by the kernel, but nothing answers.
func (m *MariaDB) Freeze() { m.signal(syscall.SIGSTOP) }

// Thaw lets a frozen server go on (SIGCONT).
func (m *MariaDB) Thaw() { m.signal(syscall.SIGCONT) }

func (m *MariaDB) signal(sig syscall.Signal) {
	m.t.Helper()
	if err := m.cmd.Process.Signal(sig); err != nil {
		m.t.Fatalf("private mariadb: %s: %v", sig, err)
	}
}
