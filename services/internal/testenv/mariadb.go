package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// MariaDB is a private mariadbd process of one test.
type MariaDB struct {
	// Port is its TCP port on 127.0.0.1.
	Port int
	// SocketDSN reaches it as root over its Unix socket (no database),
	// which counts as a secure transport even when TCP requires TLS.
	SocketDSN string
}

// StartMariaDB initialises a data directory and starts mariadbd on a free
// port with args added (e.g. --ssl-cert=...), and stops it when the test
// ends. It needs mariadb-install-db and mariadbd.
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
	m := &MariaDB{Port: FreePort(t), SocketDSN: "root@unix(" + sock + ")/"}
	cmd := exec.Command("mariadbd", append([]string{"--no-defaults", "--datadir=" + data,
		"--port=" + strconv.Itoa(m.Port), "--bind-address=127.0.0.1", "--socket=" + sock, "--user=root",
		"--skip-log-bin", "--innodb-buffer-pool-size=32M", "--log-error=" + filepath.Join(dir, "error.log")}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start mariadbd: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
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
