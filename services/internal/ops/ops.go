// Package ops serves the endpoints every ax process exposes: /livez (the
// process runs), /readyz (its dependencies answer) and /metrics
// (Prometheus). The submitter mounts its API on the same server. Every
// request passes the checks of package httpedge first, and the server's
// timeouts bound how long a client may hold a connection.
package ops

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/axsched/ax/services/internal/httpedge"
)

// Defaults for Config's timeouts.
const (
	// ReadHeaderTimeoutDefault bounds the request line and headers.
	ReadHeaderTimeoutDefault = 10 * time.Second
	// ReadTimeoutDefault bounds the whole request with its body: a 16 MiB
	// batch needs about 560 KiB/s, and a body trickled byte by byte is cut.
	ReadTimeoutDefault = 30 * time.Second
	// WriteTimeoutDefault bounds the handler and the answer, from the end of
	// the headers; the slowest handler is a batch of 1,000 tasks.
	WriteTimeoutDefault = 60 * time.Second
	// IdleTimeoutDefault closes a keep-alive connection that sends nothing.
	IdleTimeoutDefault = 60 * time.Second
)

// Config tunes the HTTP server. A zero duration means its default.
type Config struct {
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	// Edge holds the Host and CORS allow-lists and the rate limit.
	Edge httpedge.Config
}

// Validate reports the first unusable setting.
func (c *Config) Validate() error {
	for name, d := range map[string]time.Duration{"read header timeout": c.ReadHeaderTimeout, "read timeout": c.ReadTimeout,
		"write timeout": c.WriteTimeout, "idle timeout": c.IdleTimeout} {
		if d < 0 {
			return fmt.Errorf("http %s %s is negative", name, d)
		}
	}
	return c.Edge.Validate()
}

func (c *Config) withDefaults() {
	set := func(d *time.Duration, def time.Duration) {
		if *d == 0 {
			*d = def
		}
	}
	set(&c.ReadHeaderTimeout, ReadHeaderTimeoutDefault)
	set(&c.ReadTimeout, ReadTimeoutDefault)
	set(&c.WriteTimeout, WriteTimeoutDefault)
	set(&c.IdleTimeout, IdleTimeoutDefault)
}

// Check reports whether one dependency is usable.
type Check func(ctx context.Context) error

// Server is an HTTP server with the ops endpoints and room for more routes.
type Server struct {
	Mux    *http.ServeMux
	addr   string
	cfg    Config
	logger *slog.Logger

	mu       sync.Mutex
	checks   map[string]Check
	draining bool
	ln       net.Listener
	wrap     []func(http.Handler) http.Handler
}

// New builds a server for addr ("127.0.0.1:8080"); Run checks cfg.
func New(addr string, cfg Config, logger *slog.Logger) *Server {
	cfg.withDefaults()
	s := &Server{Mux: http.NewServeMux(), addr: addr, cfg: cfg, logger: logger, checks: map[string]Check{}}
	s.Mux.HandleFunc("GET /livez", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte("ok\n"))
	})
	s.Mux.HandleFunc("GET /readyz", s.readyz)
	s.Mux.Handle("GET /metrics", promhttp.Handler())
	return s
}

// Use wraps every request in mw (authentication, for one); the first
// added sees a request first. Call it before Run.
func (s *Server) Use(mw func(http.Handler) http.Handler) {
	s.wrap = append(s.wrap, mw)
}

// AddCheck registers a readiness check under name.
func (s *Server) AddCheck(name string, c Check) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks[name] = c
}

// SetDraining makes /readyz fail so load balancers stop sending work while
// the process shuts down.
func (s *Server) SetDraining() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draining = true
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	s.mu.Lock()
	draining := s.draining
	checks := make(map[string]Check, len(s.checks))
	for k, v := range s.checks {
		checks[k] = v
	}
	s.mu.Unlock()
	if draining {
		http.Error(w, "draining", http.StatusServiceUnavailable)
		return
	}
	var failed []string
	for name, c := range checks {
		if err := c(ctx); err != nil {
			failed = append(failed, fmt.Sprintf("%s: %v", name, err))
		}
	}
	if len(failed) > 0 {
		http.Error(w, fmt.Sprint(failed), http.StatusServiceUnavailable)
		return
	}
	w.Write([]byte("ok\n"))
}

// Listen binds the address now, so callers learn of a port clash at start-up
// and tests can use ":0".
func (s *Server) Listen() error {
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listen %s: %w", s.addr, err)
	}
	s.ln = ln
	return nil
}

// Addr is the bound address (after Listen).
func (s *Server) Addr() string {
	if s.ln == nil {
		return s.addr
	}
	return s.ln.Addr().String()
}

// Handler is what Run serves: Mux behind the edge checks of package
// httpedge.
func (s *Server) Handler() (http.Handler, error) {
	// The Host allow-list is made from the configured address, not the
	// bound one: a server configured as ":8080" answers any Host.
	h, err := httpedge.New(s.cfg.Edge, s.addr, s.Mux, s.logger, s.wrap...)
	if err != nil {
		return nil, fmt.Errorf("http config: %w", err)
	}
	return h, nil
}

// Run serves until ctx ends, then shuts down gracefully within 10 s.
func (s *Server) Run(ctx context.Context) error {
	if err := s.cfg.Validate(); err != nil {
		return fmt.Errorf("http config: %w", err)
	}
	if s.ln == nil {
		if err := s.Listen(); err != nil {
			return err
		}
	}
	h, err := s.Handler()
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: s.cfg.ReadHeaderTimeout, ReadTimeout: s.cfg.ReadTimeout,
		WriteTimeout: s.cfg.WriteTimeout, IdleTimeout: s.cfg.IdleTimeout, ErrorLog: slog.NewLogLogger(s.logger.Handler(), slog.LevelDebug)}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(s.ln) }()
	s.logger.Info("http listening", "addr", s.Addr())
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("http shutdown: %w", err)
	}
	return nil
}
