// Package httpedge is what every ax HTTP server checks before a handler
// runs: the Host header against an allow-list (DNS rebinding), CORS against
// an allow-list of origins (none by default), the route (404 and 405 as
// problem+json), the content type of state-changing requests, and a
// per-caller rate limit. Each check answers with a contracts.Problem.
//
// The order is fixed: host, CORS preflight, route, content type, rate
// limit. A request the server will not answer for is refused before it can
// use a token, and a malformed request to a real route is refused before it
// can reach a handler.
package httpedge

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/clock"
)

// Config is the edge's settings. The zero value answers only loopback host
// names, sends no CORS headers and has no rate limit.
type Config struct {
	// AllowedHosts are the host names (without port) a request's Host
	// header may name; "*" allows any. Empty means DefaultHosts of the bind
	// address.
	AllowedHosts []string
	// CORSOrigins are the origins ("https://console.example.com") whose
	// pages may call the API from a browser. Empty: no CORS headers, and
	// every preflight is refused.
	CORSOrigins []string
	// RateLimit is the requests per second each caller may send to /v1/
	// routes; 0 turns the limit off.
	RateLimit float64
	// RateBurst is how many requests a caller may send at once; 0 means
	// RateLimit rounded up (at least 1).
	RateBurst int
	// RateKey names the bucket a request draws from; nil means the remote
	// IP. An authenticating server passes the API key's name.
	RateKey func(r *http.Request) string
	// Clock refills the buckets; nil means the local clock.
	Clock clock.Clock
}

// Validate reports the first unusable setting.
func (c *Config) Validate() error {
	if c.RateLimit < 0 {
		return fmt.Errorf("rate limit %g is negative: give requests per second, or 0 for no limit", c.RateLimit)
	}
	if c.RateBurst < 0 {
		return fmt.Errorf("rate burst %d is negative", c.RateBurst)
	}
	for _, o := range c.CORSOrigins {
		if o == "*" || !strings.Contains(o, "://") || strings.HasSuffix(o, "/") {
			return fmt.Errorf("CORS origin %q: want a scheme and host like https://console.example.com, no path, no wildcard", o)
		}
	}
	for _, h := range c.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/ ") {
			return fmt.Errorf("allowed host %q: want a host name or address without port, or *", h)
		}
	}
	return nil
}

// New wraps mux with the edge checks. bindAddr is the listen address, from
// which the default Host allow-list is made. inner, first outermost, run
// after the edge's own checks and before the rate limit, so authentication
// there can name the bucket a request draws from (Config.RateKey).
func New(cfg Config, bindAddr string, mux *http.ServeMux, logger *slog.Logger, inner ...func(http.Handler) http.Handler) (http.Handler, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	hosts := cfg.AllowedHosts
	if len(hosts) == 0 {
		hosts = DefaultHosts(bindAddr)
	}
	var h http.Handler = mux
	if cfg.RateLimit > 0 {
		h = NewLimiter(cfg).Wrap(h)
	}
	for i := len(inner) - 1; i >= 0; i-- {
		h = inner[i](h)
	}
	h = requireJSON(h)
	h = routes(mux, h)
	h = cors(cfg.CORSOrigins, h)
	h = allowHosts(hosts, h)
	logger.Info("http edge", "allowed_hosts", strings.Join(hosts, ","), "cors_origins", strings.Join(cfg.CORSOrigins, ","),
		"rate_limit", cfg.RateLimit)
	return h, nil
}

// WriteProblem answers p as application/problem+json.
func WriteProblem(w http.ResponseWriter, p *contracts.Problem) {
	w.Header().Set("Content-Type", contracts.ProblemContentType)
	w.WriteHeader(p.Status)
	_ = json.NewEncoder(w).Encode(p)
}
