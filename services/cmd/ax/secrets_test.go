package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestSecretsStayOutOfSight plants a MySQL password, a webhook secret and
// an API token in a real `ax up` process (from the environment, as the
// docs say), runs tasks, provokes error answers, and finds none of the
// three in its log, /metrics, the answers or its command line. A password
// given on the command line is refused, without being echoed.
func TestSecretsStayOutOfSight(t *testing.T) {
	bin := filepath.Join(binaries(t), "ax")
	dsn := testenv.MySQLUser(t, testenv.MigratedDSN(t), store.ServicePrivileges)
	parsed, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	dbPassword := parsed.Passwd
	webhookSecret := "whsec-" + testenv.Suffix() + testenv.Suffix()
	_, k := testenv.Redis(t)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	defer hook.Close()

	env := []string{"AX_MYSQL_DSN=" + dsn, "AX_WEBHOOK_SECRET=" + webhookSecret}
	out, err := axEnv(bin, env, "key", "create", "--name", "root", "--role", "admin")
	require.NoError(t, err, "%s", out)
	token := strings.SplitN(out, "\n", 2)[0]
	require.NotEmpty(t, token)

	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	p := startEnv(t, "ax-up", bin, append(env, "AX_LOG_LEVEL=debug"), "up", "--http", addr, "--auth", "on",
		"--migrate=false", "--redis-prefix", k.Prefix, "--data-dir", t.TempDir(),
		"--nats-listen", "127.0.0.1:"+strconv.Itoa(testenv.FreePort(t)), "--webhook", "hook="+hook.URL)
	waitReady(t, p, addr)

	api := client.New(addr, client.WithToken(token))
	task, err := api.Submit(context.Background(), contracts.SubmitRequest{Type: "hook"})
	require.NoError(t, err)
	testenv.Eventually(t, 30*time.Second, "the webhook task SUCCESS", func() bool {
		got, err := api.Get(context.Background(), task.ID)
		return err == nil && got.Status == contracts.StatusSuccess
	})

	// A near miss, which an answer must not echo either.
	wrong := token[:len(token)-1] + string("ab"[strings.Count(token[len(token)-1:], "a")])
	var seen strings.Builder
	for _, r := range []struct{ method, path, token, body string }{
		{"GET", "/metrics", token, ""},
		{"GET", "/v1/nodes", token, ""},
		{"GET", "/v1/tasks/1", "", ""},
		{"GET", "/v1/tasks/1", wrong, ""},
		{"GET", "/v1/tasks/1", "ax_" + dbPassword, ""},
		{"POST", "/v1/tasks", token, `{"type": 1}`},
		{"POST", "/v1/tasks", token, `{"type":"hook","payload":"` + webhookSecret + `"`},
		{"GET", "/v1/tasks/999", token, ""},
	} {
		seen.WriteString(request(t, addr, r.method, r.path, r.token, r.body))
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.cmd.Process.Pid))
	require.NoError(t, err)
	p.stop(t, 30*time.Second)
	log, err := os.ReadFile(p.log)
	require.NoError(t, err)
	require.Contains(t, string(log), "ax running", "the log was read after a real run")

	for name, secret := range map[string]string{"mysql password": dbPassword, "webhook secret": webhookSecret, "api token": token} {
		require.NotContains(t, string(log), secret, "%s in the log", name)
		require.NotContains(t, string(cmdline), secret, "%s on the command line", name)
		require.NotContains(t, seen.String(), secret, "%s in an answer or /metrics", name)
	}
	require.Contains(t, seen.String(), "ax_executor_runs_total", "/metrics was read")
	require.Contains(t, seen.String(), "GET /v1/tasks/1: 401", "a wrong token was answered")
}

// TestSecretsOnTheCommandLineAreRefused: a password in --mysql-dsn or
// --nats-url is refused with where it belongs, and not echoed; the same
// DSN from a file works.
func TestSecretsOnTheCommandLineAreRefused(t *testing.T) {
	bin := filepath.Join(binaries(t), "ax")
	dsn := testenv.MySQLUser(t, testenv.MigratedDSN(t), store.ServicePrivileges)
	parsed, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	for _, args := range [][]string{
		{"migrate", "status", "--mysql-dsn", dsn},
		{"key", "list", "--mysql-dsn", dsn},
		{"submitter", "--mysql-dsn", dsn, "--nats-url", "nats://127.0.0.1:1"},
		{"up", "--mysql-dsn", dsn},
		{"executor", "--nats-url", "nats://ax:" + parsed.Passwd + "@127.0.0.1:1"},
	} {
		out, err := axEnv(bin, nil, args...)
		require.Error(t, err, "%v", args)
		require.Contains(t, out, "process list", "%v", args)
		require.NotContains(t, out, parsed.Passwd, "%v", args)
	}

	file := filepath.Join(t.TempDir(), "dsn")
	require.NoError(t, os.WriteFile(file, []byte(dsn+"\n"), 0o600))
	out, err := axEnv(bin, nil, "migrate", "status", "--mysql-dsn-file", file)
	require.NoError(t, err, "%s", out)
	require.Contains(t, out, fmt.Sprintf("applied: %d", store.SchemaVersion))
	out, err = axEnv(bin, []string{"AX_MYSQL_DSN=" + dsn}, "key", "list")
	require.NoError(t, err, "%s", out)
}

// axEnv runs the ax binary to completion with more environment variables
// and returns its combined output.
func axEnv(bin string, env []string, args ...string) (string, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// waitReady waits for a started process's /readyz.
func waitReady(t *testing.T, p *proc, addr string) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, p.name+" ready", func() bool {
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("%s exited during start-up: %v", p.name, err)
		default:
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// request sends one request and returns its status line and body.
func request(t *testing.T, addr, method, path, token, body string) string {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return fmt.Sprintf("%s %s: %d %s\n", method, path, res.StatusCode, b)
}
