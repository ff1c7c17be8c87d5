package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
	"github.com/axsched/ax/services/internal/natsperm"
	"github.com/axsched/ax/services/internal/testenv"
)

// natsUsers is a private nats-server configured with `ax nats-config`.
type natsUsers struct {
	url       string
	log       string
	passwords map[string]string
}

// startNATSWithUsers starts nats-server with JetStream and the accounts
// block `ax nats-config` prints, the users' passwords in its environment.
func startNATSWithUsers(t *testing.T, bin string) *natsUsers {
	t.Helper()
	dir := t.TempDir()
	out, err := axEnv(filepath.Join(bin, "ax"), nil, "nats-config")
	require.NoError(t, err, "%s", out)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ax-users.conf"), []byte(out), 0o600))
	port := testenv.FreePort(t)
	main := fmt.Sprintf("listen: \"127.0.0.1:%d\"\njetstream { store_dir: %q }\ninclude \"ax-users.conf\"\n", port, filepath.Join(dir, "js"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nats.conf"), []byte(main), 0o600))
	n := &natsUsers{url: fmt.Sprintf("nats://127.0.0.1:%d", port), passwords: map[string]string{}}
	var env []string
	for _, s := range natsperm.Services {
		n.passwords[s] = "pw-" + s + "-" + testenv.Suffix()
		env = append(env, natsperm.PasswordVar(s)+"="+n.passwords[s])
	}
	p := startEnv(t, "nats-server", filepath.Join(bin, "nats-server"), env, "-c", filepath.Join(dir, "nats.conf"))
	n.log = p.log
	testenv.Eventually(t, 30*time.Second, "nats-server accepting connections", func() bool {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	return n
}

// connect connects as service's user and collects the server's
// permission refusals, which NATS reports asynchronously; the returned
// function waits for the refusals wanted (all of them, or fails the test)
// and returns every refusal seen.
func (n *natsUsers) connect(t *testing.T, service string) (*nats.Conn, func(wants ...string) string) {
	t.Helper()
	var mu sync.Mutex
	var errs []string
	user := natsperm.User(service)
	nc, err := nats.Connect(n.url, nats.UserInfo(user, n.passwords[service]),
		nats.CustomInboxPrefix(natsperm.InboxPrefix(user)),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			mu.Lock()
			errs = append(errs, err.Error())
			mu.Unlock()
		}))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	seen := func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(errs, "\n")
	}
	return nc, func(wants ...string) string {
		require.NoError(t, nc.Flush())
		for _, w := range wants {
			testenv.Eventually(t, 5*time.Second, "refusal "+w, func() bool { return strings.Contains(seen(), w) })
		}
		return seen()
	}
}

// TestServicesRunAsTheirOwnNATSUsers runs the five services as processes,
// each as its own NATS user with the permissions `ax nats-config` grants:
// tasks run, due later and after a retry, with no permission refused;
// then the executor's and the submitter's credentials are shown unable to
// do what their services never do.
func TestServicesRunAsTheirOwnNATSUsers(t *testing.T) {
	bin := binaries(t)
	n := startNATSWithUsers(t, bin)
	dsn := testenv.MySQLDSN(t)
	out, err := axEnv(filepath.Join(bin, "ax"), nil, "migrate", "up", "--mysql-dsn", dsn)
	require.NoError(t, err, "%s", out)
	_, k := testenv.Redis(t)

	var api *client.Client
	for _, svc := range []string{"submitter", "timer", "dispatcher", "executor", "reaper"} {
		addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
		p := startEnv(t, svc, filepath.Join(bin, "ax"), []string{"AX_NATS_PASSWORD=" + n.passwords[svc]},
			svc, "--http", addr, "--node", svc+"-1", "--builtins", "--mysql-dsn", dsn, "--redis-prefix", k.Prefix,
			"--nats-url", n.url, "--nats-user", natsperm.User(svc))
		waitReady(t, p, addr)
		if svc == "submitter" {
			api = client.New(addr)
		}
	}
	ctx := context.Background()
	var ids []string
	for _, req := range []contracts.SubmitRequest{
		{Type: "ax.noop"}, {Type: "ax.noop", Delay: "1s"},
		{Type: "ax.flaky", Payload: []byte(`{"fail_times":1}`)},
	} {
		task, err := api.Submit(ctx, req)
		require.NoError(t, err)
		ids = append(ids, task.ID)
	}
	for _, id := range ids {
		testenv.Eventually(t, 60*time.Second, "task "+id+" SUCCESS", func() bool {
			task, err := api.Get(ctx, id)
			return err == nil && task.Status == contracts.StatusSuccess
		})
	}
	serverLog, err := os.ReadFile(n.log)
	require.NoError(t, err)
	require.NotContains(t, string(serverLog), "Violation", "a service was refused something it needs")

	exec, execErrs := n.connect(t, "executor")
	require.NoError(t, exec.Publish("$JS.API.STREAM.DELETE.AX_EVENTS", nil))
	require.NoError(t, exec.Publish("$JS.API.CONSUMER.MSG.NEXT.AX_WORK.dispatcher", nil))
	_, err = exec.SubscribeSync("ax.events.>")
	require.NoError(t, err)
	execErrs(`Permissions Violation for Publish to "$JS.API.STREAM.DELETE.AX_EVENTS"`,
		`Permissions Violation for Publish to "$JS.API.CONSUMER.MSG.NEXT.AX_WORK.dispatcher"`,
		`Permissions Violation for Subscription to "ax.events.>"`)

	sub, subErrs := n.connect(t, "submitter")
	require.NoError(t, sub.Publish("ax.work.due", []byte("{}")))
	require.NoError(t, sub.Publish("$JS.API.CONSUMER.CREATE.AX_WORK.x.ax.work.exec.>", nil))
	_, err = sub.SubscribeSync("_INBOX.ax-executor.>")
	require.NoError(t, err)
	subErrs(`Permissions Violation for Publish to "ax.work.due"`,
		`Permissions Violation for Publish to "$JS.API.CONSUMER.CREATE.AX_WORK.x.ax.work.exec.>"`,
		`Permissions Violation for Subscription to "_INBOX.ax-executor.>"`) // another user's replies

	// The control: what the executor does use is allowed.
	wake, err := exec.SubscribeSync("ax.relay.wake")
	require.NoError(t, err)
	require.NoError(t, exec.Publish("ax.relay.wake", nil))
	_, err = wake.NextMsg(5 * time.Second)
	require.NoError(t, err)
	require.NotContains(t, execErrs(), "ax.relay.wake")
}
