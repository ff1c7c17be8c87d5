package httpedge_test

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/httpedge"
)

// testMux has one route of each kind the API has.
func testMux() *http.ServeMux {
	mux := http.NewServeMux()
	ok := func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) }
	mux.HandleFunc("GET /v1/things/{id}", ok)
	mux.HandleFunc("POST /v1/things", ok)
	mux.HandleFunc("POST /v1/things/{id}/cancel", ok)
	mux.HandleFunc("GET /livez", ok)
	return mux
}

func newEdge(t *testing.T, cfg httpedge.Config, bind string) http.Handler {
	t.Helper()
	h, err := httpedge.New(cfg, bind, testMux(), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	return h
}

type request struct {
	method, target, host, contentType, origin string
	preflight                                 bool
}

func serve(h http.Handler, q request) *httptest.ResponseRecorder {
	var body io.Reader
	if q.method == http.MethodPost {
		body = strings.NewReader("{}")
	}
	r := httptest.NewRequest(q.method, q.target, body)
	r.Host = q.host
	if q.host == "" {
		r.Host = "127.0.0.1:8080"
	}
	if q.contentType != "" {
		r.Header.Set("Content-Type", q.contentType)
	}
	if q.origin != "" {
		r.Header.Set("Origin", q.origin)
	}
	if q.preflight {
		r.Header.Set("Access-Control-Request-Method", "POST")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func requireProblem(t *testing.T, rec *httptest.ResponseRecorder, status int, code string) {
	t.Helper()
	require.Equal(t, status, rec.Code, rec.Body.String())
	require.Equal(t, contracts.ProblemContentType, rec.Header().Get("Content-Type"))
	var p contracts.Problem
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
	require.Equal(t, code, p.Code)
	require.Equal(t, status, p.Status)
	require.Equal(t, "urn:ax:error:"+code, p.Type)
	require.NotEmpty(t, p.Detail)
}

func TestEdgeRefusesWhatNoHandlerShouldSee(t *testing.T) {
	h := newEdge(t, httpedge.Config{CORSOrigins: []string{"https://console.example.com"}}, "127.0.0.1:8080")
	const json = "application/json"
	tests := []struct {
		name   string
		req    request
		status int
		code   string // empty: the handler answered
	}{
		{"loopback host", request{method: "GET", target: "/v1/things/1", host: "localhost:8080"}, 200, ""},
		{"ipv6 loopback host", request{method: "GET", target: "/v1/things/1", host: "[::1]:8080"}, 200, ""},
		{"rebound host", request{method: "GET", target: "/v1/things/1", host: "evil.example:8080"}, 421, contracts.CodeMisdirectedRequest},
		{"rebound host on ops path", request{method: "GET", target: "/livez", host: "evil.example"}, 421, contracts.CodeMisdirectedRequest},
		{"json post", request{method: "POST", target: "/v1/things", contentType: json}, 200, ""},
		{"json with charset", request{method: "POST", target: "/v1/things", contentType: "application/json; charset=utf-8"}, 200, ""},
		{"text/plain post", request{method: "POST", target: "/v1/things", contentType: "text/plain"}, 415, contracts.CodeUnsupportedMediaType},
		{"form post", request{method: "POST", target: "/v1/things", contentType: "application/x-www-form-urlencoded"}, 415, contracts.CodeUnsupportedMediaType},
		{"bodyless post without type", request{method: "POST", target: "/v1/things/1/cancel"}, 415, contracts.CodeUnsupportedMediaType},
		{"unknown route", request{method: "GET", target: "/v1/nope"}, 404, contracts.CodeNotFound},
		{"unknown route, wrong type", request{method: "POST", target: "/v1/nope", contentType: "text/plain"}, 404, contracts.CodeNotFound},
		{"wrong method", request{method: "DELETE", target: "/v1/things/1", contentType: json}, 405, contracts.CodeMethodNotAllowed},
		{"preflight of unknown origin", request{method: "OPTIONS", target: "/v1/things", origin: "https://evil.example", preflight: true}, 403, contracts.CodeOriginNotAllowed},
		{"preflight of allowed origin", request{method: "OPTIONS", target: "/v1/things", origin: "https://console.example.com", preflight: true}, 204, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := serve(h, tc.req)
			if tc.code != "" {
				requireProblem(t, rec, tc.status, tc.code)
				return
			}
			require.Equal(t, tc.status, rec.Code, rec.Body.String())
		})
	}
}

func TestMethodNotAllowedKeepsAllow(t *testing.T) {
	rec := serve(newEdge(t, httpedge.Config{}, "127.0.0.1:0"), request{method: "PUT", target: "/v1/things/1", contentType: "application/json"})
	requireProblem(t, rec, 405, contracts.CodeMethodNotAllowed)
	require.Contains(t, rec.Header().Get("Allow"), "GET")
}

func TestUncleanPathIsStillRedirected(t *testing.T) {
	rec := serve(newEdge(t, httpedge.Config{}, "127.0.0.1:0"), request{method: "GET", target: "/v1//things/1"})
	require.Equal(t, http.StatusTemporaryRedirect, rec.Code)
	require.Equal(t, "/v1/things/1", rec.Header().Get("Location"))
}

func TestCORSHeadersOnlyForAllowedOrigins(t *testing.T) {
	closed := newEdge(t, httpedge.Config{}, "127.0.0.1:0")
	rec := serve(closed, request{method: "GET", target: "/v1/things/1", origin: "https://console.example.com"})
	require.Equal(t, 200, rec.Code)
	require.Empty(t, rec.Header().Get("Access-Control-Allow-Origin"), "no CORS by default")
	requireProblem(t, serve(closed, request{method: "OPTIONS", target: "/v1/things", origin: "https://console.example.com", preflight: true}),
		403, contracts.CodeOriginNotAllowed)

	open := newEdge(t, httpedge.Config{CORSOrigins: []string{"https://console.example.com"}}, "127.0.0.1:0")
	rec = serve(open, request{method: "GET", target: "/v1/things/1", origin: "https://console.example.com"})
	require.Equal(t, "https://console.example.com", rec.Header().Get("Access-Control-Allow-Origin"))
	rec = serve(open, request{method: "GET", target: "/v1/things/1", origin: "https://evil.example"})
	require.Empty(t, rec.Header().Get("Access-Control-Allow-Origin"))
	rec = serve(open, request{method: "OPTIONS", target: "/v1/things", origin: "https://console.example.com", preflight: true})
	require.Equal(t, 204, rec.Code)
	require.Contains(t, rec.Header().Get("Access-Control-Allow-Headers"), "Content-Type")
}

func TestHostAllowList(t *testing.T) {
	for _, tc := range []struct {
		bind string
		want []string
	}{
		{"127.0.0.1:8080", []string{"localhost", "127.0.0.1", "::1"}},
		{"[::1]:8080", []string{"localhost", "127.0.0.1", "::1"}},
		{"10.1.2.3:8080", []string{"localhost", "127.0.0.1", "::1", "10.1.2.3"}},
		{"ax.internal:8080", []string{"localhost", "127.0.0.1", "::1", "ax.internal"}},
		{"0.0.0.0:8080", []string{"*"}},
		{":8080", []string{"*"}},
		{"[::]:8080", []string{"*"}},
	} {
		require.Equal(t, tc.want, httpedge.DefaultHosts(tc.bind), tc.bind)
	}
	wide := newEdge(t, httpedge.Config{}, "0.0.0.0:8080")
	require.Equal(t, 200, serve(wide, request{method: "GET", target: "/livez", host: "10.9.8.7:8080"}).Code)
	listed := newEdge(t, httpedge.Config{AllowedHosts: []string{"ax.example.com"}}, "0.0.0.0:8080")
	require.Equal(t, 200, serve(listed, request{method: "GET", target: "/livez", host: "AX.example.com:443"}).Code)
	requireProblem(t, serve(listed, request{method: "GET", target: "/livez", host: "localhost:8080"}), 421, contracts.CodeMisdirectedRequest)
}

func TestConfigValidate(t *testing.T) {
	for _, cfg := range []httpedge.Config{
		{RateLimit: -1},
		{RateBurst: -1},
		{CORSOrigins: []string{"*"}},
		{CORSOrigins: []string{"console.example.com"}},
		{CORSOrigins: []string{"https://console.example.com/"}},
		{AllowedHosts: []string{"ax.example.com:8080/x"}},
	} {
		require.Error(t, cfg.Validate(), "%+v", cfg)
	}
}

// fakeClock is set by the test.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func TestRateLimitPerKey(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	key := func(r *http.Request) string { return r.Header.Get("X-Test-Key") }
	h := newEdge(t, httpedge.Config{RateLimit: 0.5, RateBurst: 2, RateKey: key, Clock: clk}, "127.0.0.1:0")
	get := func(k, path string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Host = "localhost"
		r.Header.Set("X-Test-Key", k)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		return rec
	}
	require.Equal(t, 200, get("alice", "/v1/things/1").Code)
	require.Equal(t, 200, get("alice", "/v1/things/1").Code)
	rec := get("alice", "/v1/things/1")
	requireProblem(t, rec, 429, contracts.CodeRateLimited)
	require.Equal(t, "2", rec.Header().Get("Retry-After"), "one token per 2 s")
	require.Equal(t, 200, get("bob", "/v1/things/1").Code, "another key has its own bucket")
	require.Equal(t, 200, get("alice", "/livez").Code, "ops endpoints are not limited")

	clk.advance(1500 * time.Millisecond)
	rec = get("alice", "/v1/things/1")
	requireProblem(t, rec, 429, contracts.CodeRateLimited)
	require.Equal(t, "1", rec.Header().Get("Retry-After"), "0.5 s left, rounded up")
	clk.advance(500 * time.Millisecond)
	require.Equal(t, 200, get("alice", "/v1/things/1").Code, "a refused request spends no token")
}

func TestRateLimiterDropsFullBuckets(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1_700_000_000, 0)}
	l := httpedge.NewLimiter(httpedge.Config{RateLimit: 10, Clock: clk})
	h := l.Wrap(testMux())
	for _, ip := range []string{"10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:1"} {
		r := httptest.NewRequest(http.MethodGet, "/v1/things/1", nil)
		r.RemoteAddr = ip
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	require.Equal(t, 3, l.Buckets(), "one bucket per remote IP")
	clk.advance(2 * time.Minute)
	r := httptest.NewRequest(http.MethodGet, "/v1/things/1", nil)
	r.RemoteAddr = "10.0.0.4:1"
	h.ServeHTTP(httptest.NewRecorder(), r)
	require.Equal(t, 1, l.Buckets(), "refilled buckets are dropped")
}
