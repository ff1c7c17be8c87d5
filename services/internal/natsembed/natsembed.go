// Package natsembed runs a NATS server with JetStream inside the ax process,
// so `ax up` needs no NATS installation. Its file store lives under the data
// directory and survives restarts.
package natsembed

import (
	"crypto/tls"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Sync policies for the JetStream file store.
const (
	// SyncDefault lets the server flush to disk every couple of minutes and
	// on demand; a machine crash can lose the last unsynced messages, which
	// ax tolerates because MySQL is the truth and reconcilers re-drive work.
	SyncDefault = "default"
	// SyncAlways fsyncs every message: nothing acknowledged is ever lost,
	// at roughly a tenth of the throughput.
	SyncAlways = "always"
)

// Config configures the embedded server.
type Config struct {
	// Listen is host:port; port 0 picks a free one.
	Listen string
	// StoreDir holds the JetStream file store.
	StoreDir string
	// Sync is SyncDefault or SyncAlways.
	Sync string
	// TLS, when set, makes clients connect over TLS; with ClientAuth set
	// to tls.RequireAndVerifyClientCert they need a certificate too.
	TLS *tls.Config
	// MaxPayload, when set, is the largest message the server accepts, in
	// bytes (its max_payload; 1 MB by default).
	MaxPayload int32
}

// Server is a running embedded NATS server.
type Server struct {
	srv *server.Server
}

// Start starts the server and waits until it accepts connections.
func Start(cfg Config) (*Server, error) {
	host, portStr, err := net.SplitHostPort(cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("embedded nats listen address %q: %w", cfg.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("embedded nats port %q: %w", portStr, err)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	opts := &server.Options{
		ServerName: "ax-embedded",
		Host:       host,
		Port:       port,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoSigs:     true,
		NoLog:      true,
		MaxPayload: cfg.MaxPayload,
	}
	if cfg.TLS != nil {
		opts.TLSConfig, opts.TLS = cfg.TLS, true
		opts.TLSVerify = cfg.TLS.ClientAuth == tls.RequireAndVerifyClientCert
	}
	switch cfg.Sync {
	case "", SyncDefault:
	case SyncAlways:
		opts.SyncAlways = true
	default:
		return nil, fmt.Errorf("unknown nats sync policy %q: want %q or %q", cfg.Sync, SyncDefault, SyncAlways)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("embedded nats: %w", err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, fmt.Errorf("embedded nats did not start within 10s (is %s free?)", cfg.Listen)
	}
	return &Server{srv: srv}, nil
}

// URL is the client URL of the server.
func (s *Server) URL() string { return s.srv.ClientURL() }

// Shutdown stops the server and waits for it.
func (s *Server) Shutdown() {
	s.srv.Shutdown()
	s.srv.WaitForShutdown()
}
