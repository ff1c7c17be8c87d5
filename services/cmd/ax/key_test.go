package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/testenv"
)

func TestKeyCommands(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	out, err := runAx(t, "key", "create", "--name", "alice", "--role", "operate", "--mysql-dsn", dsn)
	require.NoError(t, err)
	token := strings.TrimSpace(out)
	require.True(t, strings.HasPrefix(token, "ax_"), "stdout holds the token alone: %q", out)

	_, err = runAx(t, "key", "create", "--name", "alice", "--role", "read", "--mysql-dsn", dsn)
	require.ErrorContains(t, err, "never reused")
	_, err = runAx(t, "key", "create", "--name", "bob", "--role", "root", "--mysql-dsn", dsn)
	require.ErrorContains(t, err, "want submit, read, operate or admin")
	_, err = runAx(t, "key", "create", "--name", "Bob Smith", "--role", "read", "--mysql-dsn", dsn)
	require.ErrorContains(t, err, "key name")

	out, err = runAx(t, "key", "list", "--mysql-dsn", dsn)
	require.NoError(t, err)
	require.Contains(t, out, "alice")
	require.Contains(t, out, token[:10], "the prefix is listed")
	require.NotContains(t, out, token, "the token is never listed")
	require.NotContains(t, out, "bob", "refused commands create nothing")

	out, err = runAx(t, "key", "revoke", "alice", "--mysql-dsn", dsn)
	require.NoError(t, err)
	require.Contains(t, out, "revoked key alice")
	_, err = runAx(t, "key", "revoke", "alice", "--mysql-dsn", dsn)
	require.ErrorContains(t, err, "already revoked")
}

// TestServerAuthAtStart: bound beyond loopback with no key, a process
// refuses to start; on loopback with no key it runs open and says so
// first; once a key exists it checks tokens, which the CLI reads from a
// file or AX_TOKEN.
func TestServerAuthAtStart(t *testing.T) {
	c := newCluster(t)
	open := start(t, "open-wide", c.bin, append([]string{"submitter", "--http", fmt.Sprintf("0.0.0.0:%d", testenv.FreePort(t)), "--node", "wide"}, c.commonFl...)...)
	select {
	case err := <-open.done:
		open.done <- err
		require.Error(t, err, "a process bound to 0.0.0.0 with no key must not run")
	case <-time.After(60 * time.Second):
		t.Fatal("a process bound to 0.0.0.0 with no key kept running")
	}
	log, err := os.ReadFile(open.log)
	require.NoError(t, err)
	require.Contains(t, string(log), "not a loopback address and no API key exists")

	laptop := c.service(t, "submitter", "laptop")
	log, err = os.ReadFile(laptop.log)
	require.NoError(t, err)
	first, _, _ := strings.Cut(string(log), "\n")
	require.Contains(t, first, "auth off: bound to loopback", "the first log line says the API is open")
	_, err = runAx(t, "type", "list", "--api", laptop.addr)
	require.NoError(t, err)
	laptop.stop(t, 30*time.Second)

	out, err := runAx(t, "key", "create", "--name", "ops", "--role", "operate", "--mysql-dsn", c.dsn)
	require.NoError(t, err)
	token := strings.TrimSpace(out)
	guarded := c.service(t, "submitter", "guarded")
	log, err = os.ReadFile(guarded.log)
	require.NoError(t, err)
	first, _, _ = strings.Cut(string(log), "\n")
	require.Contains(t, first, "auth on")

	t.Setenv("AX_TOKEN", "")
	_, err = runAx(t, "type", "list", "--api", guarded.addr)
	require.ErrorContains(t, err, "unauthenticated")
	resp, err := http.Get("http://" + guarded.addr + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "/metrics needs a key")

	file := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(file, []byte(token+"\n"), 0o600))
	_, err = runAx(t, "type", "list", "--api", guarded.addr, "--token-file", file)
	require.NoError(t, err)
	t.Setenv("AX_TOKEN", token)
	_, err = runAx(t, "type", "list", "--api", guarded.addr)
	require.NoError(t, err)
}
