package console_test

import (
	"context"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/idgen"
	"github.com/axsched/ax/services/internal/ops"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
	"github.com/axsched/ax/services/submitter"
	"github.com/axsched/ax/services/submitter/console"
)

// TestFilesCarryTheirTypeAndThePolicy: every file answers with its own
// content type (never sniffed), the strict policy and an ETag that turns
// a repeated request into 304; an unknown file is a plain 404.
func TestFilesCarryTheirTypeAndThePolicy(t *testing.T) {
	h, err := console.New()
	require.NoError(t, err)
	tests := []struct {
		path, contentType, contains string
	}{
		{"/ui/", "text/html; charset=utf-8", `<script type="module" src="js/app.js">`},
		{"/ui/index.html", "text/html; charset=utf-8", "<title>ax console</title>"},
		{"/ui/js/app.js", "text/javascript; charset=utf-8", "import"},
		{"/ui/js/pages/task.js", "text/javascript; charset=utf-8", "timeline"},
		{"/ui/style.css", "text/css; charset=utf-8", "ol.timeline"},
		{"/ui/favicon.svg", "image/svg+xml", "<svg"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
			require.Equal(t, http.StatusOK, rec.Code)
			require.Equal(t, tc.contentType, rec.Header().Get("Content-Type"))
			require.Equal(t, console.CSP, rec.Header().Get("Content-Security-Policy"))
			require.Equal(t, "nosniff", rec.Header().Get("X-Content-Type-Options"))
			require.Equal(t, "DENY", rec.Header().Get("X-Frame-Options"))
			require.Contains(t, rec.Body.String(), tc.contains)
			etag := rec.Header().Get("ETag")
			require.NotEmpty(t, etag)

			again := httptest.NewRequest(http.MethodGet, tc.path, nil)
			again.Header.Set("If-None-Match", etag)
			rec = httptest.NewRecorder()
			h.ServeHTTP(rec, again)
			require.Equal(t, http.StatusNotModified, rec.Code)
			require.Empty(t, rec.Body.String())
		})
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/ui/nope.js", nil))
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Equal(t, "text/plain; charset=utf-8", rec.Header().Get("Content-Type"))
	require.Equal(t, console.CSP, rec.Header().Get("Content-Security-Policy"))
}

// TestPolicyIsStrict keeps the policy from being loosened by accident:
// nothing inline, nothing evaluated, nothing from elsewhere, no framing.
func TestPolicyIsStrict(t *testing.T) {
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'",
		"form-action 'none'", "base-uri 'none'", "require-trusted-types-for 'script'"} {
		require.Contains(t, console.CSP, want)
	}
	for _, loose := range []string{"unsafe-inline", "unsafe-eval", "*", "data:", "http:"} {
		require.NotContains(t, console.CSP, loose)
	}
}

// TestConsoleBehindTheEdge: the console is served through the same edge
// as the API, so a foreign Host is refused before any file is, the bare
// address leads to the console, and without keys whoami says auth is off.
func TestConsoleBehindTheEdge(t *testing.T) {
	base := startOpenSubmitter(t)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

	req, err := http.NewRequest(http.MethodGet, base+"/ui/", nil)
	require.NoError(t, err)
	req.Host = "attacker.example"
	resp, err := noRedirect.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode, "DNS rebinding cannot reach the console")

	for _, path := range []string{"/", "/ui"} {
		resp, err := noRedirect.Get(base + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusFound, resp.StatusCode, path)
		require.Equal(t, console.Prefix, resp.Header.Get("Location"), path)
	}

	resp, err = http.Get(base + "/v1/whoami")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.JSONEq(t, `{"auth":false}`, string(body))

	resp, err = http.Head(base + "/ui/js/app.js")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/javascript"))
}

// startOpenSubmitter serves the API and the console on loopback without
// auth, as `ax up` does on a laptop with no key.
func startOpenSubmitter(t *testing.T) string {
	t.Helper()
	st, _ := testenv.Store(t)
	require.NoError(t, st.RegisterType(context.Background(), store.TaskType{Name: "ax.noop", TimeoutMs: 60000, MaxRetries: 3, Priority: contracts.PriorityNormal}))
	logger := testenv.Logger(t)
	ids, err := idgen.New(2)
	require.NoError(t, err)
	srv := ops.New("127.0.0.1:0", ops.Config{}, logger)
	submitter.New(submitter.Config{Node: "laptop"}, st, ids, clock.System{}, logger).Routes(srv.Mux)
	require.NoError(t, srv.Listen())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	return "http://" + srv.Addr()
}

// TestPagesCallOnlyDocumentedRoutes reads every API call out of the pages'
// scripts and finds it in the OpenAPI document, so that a route renamed on
// one side cannot leave a page calling nothing. Calls are written as
// api('METHOD', 'path'...) or, for the bulk panel, path: 'path' (a POST).
func TestPagesCallOnlyDocumentedRoutes(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]any `yaml:"paths"`
	}
	require.NoError(t, yaml.Unmarshal(contracts.OpenAPI, &doc))
	// A documented path with its parameters as one pattern each.
	param := regexp.MustCompile(`\{[^}]+\}`)
	documented := func(method, path string) bool {
		for p, ops := range doc.Paths {
			re := regexp.QuoteMeta(param.ReplaceAllString(p, "PARAM"))
			re = "^" + strings.ReplaceAll(re, "PARAM", "[^/]+") + "$"
			if _, ok := ops[strings.ToLower(method)]; ok && regexp.MustCompile(re).MatchString(path) {
				return true
			}
		}
		return false
	}
	call := regexp.MustCompile("api\\('([A-Z]+)', [`']([^`'?]+)|path: '([^']+)'")
	// A template or a concatenation ends the literal where a value goes.
	value := regexp.MustCompile(`\$\{[^}]+\}`)
	calls := 0
	err := fs.WalkDir(console.Assets(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") {
			return err
		}
		src, err := fs.ReadFile(console.Assets(), p)
		if err != nil {
			return err
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			method, path := m[1], m[2]
			if m[3] != "" {
				method, path = "POST", m[3]
			}
			path = value.ReplaceAllString(path, "x")
			if strings.HasSuffix(path, "/") {
				path += "x"
			}
			require.True(t, documented(method, path), "%s calls %s %s, which contracts/openapi.yaml does not describe", p, method, path)
			calls++
		}
		return nil
	})
	require.NoError(t, err)
	require.GreaterOrEqual(t, calls, 15, "the scan found too few calls; is it broken?")
}
