package app_test

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/app"
	"github.com/axsched/ax/services/internal/natsembed"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
	"github.com/axsched/ax/services/internal/tlsfiles"
)

// TestConnectionsOverTLS runs ax against a MariaDB that refuses plain
// TCP, a Redis and a NATS server that serve only TLS and require a client
// certificate, all with certificates the test makes: tasks run with the
// TLS settings, and without them, or with another authority's CA, ax
// refuses to start.
func TestConnectionsOverTLS(t *testing.T) {
	certs := testenv.TLSCerts(t)
	my := testenv.StartMariaDB(t, "--ssl-ca="+certs.CA, "--ssl-cert="+certs.ServerCert,
		"--ssl-key="+certs.ServerKey, "--require-secure-transport=ON")
	require.NoError(t, store.Migrate(context.Background(), my.SocketDSN+"ax_tls"))
	my.Exec(t, "CREATE USER 'ax'@'%' IDENTIFIED BY 'ax-tls-pw' REQUIRE SSL",
		store.GrantStatement(store.ServicePrivileges, "ax_tls", "'ax'@'%'"))
	rs := testenv.StartRedisTLS(t, certs)

	client := tlsfiles.Files{CA: certs.CA, Cert: certs.ClientCert, Key: certs.ClientKey}
	good := func(c *app.Config) {
		c.MySQLDSN, c.RedisAddr, c.RedisPrefix = my.TCPDSN("ax", "ax-tls-pw", "ax_tls"), rs.Addr, "ax"
		c.EmbeddedNATS = true
		c.Embedded = natsembed.Config{Listen: "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t)),
			StoreDir: filepath.Join(t.TempDir(), "nats"), TLS: certs.ServerTLS(t)}
		c.MySQLTLS = tlsfiles.Files{CA: certs.CA}
		c.RedisTLS, c.NATSTLS = client, client
	}

	stranger := testenv.TLSCerts(t)
	for _, tc := range []struct {
		name    string
		mutate  func(*app.Config)
		wantErr string
	}{
		// REQUIRE SSL: the same user and password as the good case, refused
		// for the plain transport alone.
		{"mysql without tls", func(c *app.Config) { c.MySQLTLS = tlsfiles.Files{} }, "Access denied for user 'ax'"},
		{"mysql, another ca", func(c *app.Config) { c.MySQLTLS.CA = stranger.CA }, "certificate signed by unknown authority"},
		{"redis without tls", func(c *app.Config) { c.RedisTLS = tlsfiles.Files{} }, "ping redis"},
		{"redis, another ca", func(c *app.Config) { c.RedisTLS.CA = stranger.CA }, "certificate signed by unknown authority"},
		{"redis, no client certificate", func(c *app.Config) { c.RedisTLS = tlsfiles.Files{CA: certs.CA} }, "ping redis"},
		{"nats without tls", func(c *app.Config) { c.NATSTLS = tlsfiles.Files{} }, "connect nats"},
		{"nats, another ca", func(c *app.Config) { c.NATSTLS.CA = stranger.CA }, "certificate signed by unknown authority"},
		{"half a client pair", func(c *app.Config) { c.NATSTLS.Key = "" }, "both the client certificate and its key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := app.Config{HTTPAddr: "127.0.0.1:0", Node: "tls", Types: nil}
			good(&cfg)
			tc.mutate(&cfg)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			err := app.Run(ctx, cfg, app.AllServices, testenv.Logger(t))
			require.ErrorContains(t, err, tc.wantErr)
		})
	}

	sys := runApp(t, app.AllServices, &testenv.Clock{}, good)
	task, err := sys.api.Submit(context.Background(), contracts.SubmitRequest{Type: "ax.noop", Delay: "500ms"})
	require.NoError(t, err)
	waitStatus(t, sys.api, task.ID, contracts.StatusSuccess, 30*time.Second)
}
