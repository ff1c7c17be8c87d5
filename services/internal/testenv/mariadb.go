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

// MariaDB is a private MariaDB server, in a temporary directory on a free
// port, that a test may freeze and thaw (SIGSTOP, SIGCONT) without
// touching the machine's shared server.
type MariaDB struct {
	// DSN names the server with no database (root, no password).
	DSN string
	t   testing.TB
	cmd *exec.Cmd
}

// StartMariaDB initialises a data directory and starts mariadbd on it; the
// server is killed when the test ends.
func StartMariaDB(t testing.TB) *MariaDB {
	t.Helper()
	for _, bin := range []string{"mariadb-install-db", "mariadbd"} {
		if _, err := exec.LookPath(bin); err != nil {
			Unavailable(t, bin+" binary", err)
		}
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	out, err := exec.Command("mariadb-install-db", "--no-defaults", "--datadir="+data, "--user=root",
		"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	port := FreePort(t)
	m := &MariaDB{DSN: fmt.Sprintf("root@tcp(127.0.0.1:%d)/", port), t: t}
	m.cmd = exec.Command("mariadbd", "--no-defaults", "--datadir="+data, "--port="+strconv.Itoa(port),
		"--bind-address=127.0.0.1", "--socket="+filepath.Join(dir, "mysql.sock"), "--user=root",
		"--skip-log-bin", "--innodb-buffer-pool-size=64M", "--max-connections=300")
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
	db, err := sql.Open("mysql", m.DSN)
	if err != nil {
		t.Fatalf("open private mariadb: %v", err)
	}
	defer db.Close()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("private mariadb did not answer within 60s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Database creates database name with ax's schema and returns its DSN.
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
