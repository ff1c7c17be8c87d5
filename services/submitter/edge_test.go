package submitter_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/ops"
	"github.com/axsched/ax/services/internal/testenv"
)

// serve runs f's submitter behind the edge checks of the ops server every
// ax process runs, on a loopback port until the test ends.
func serve(t *testing.T, f *fixture, cfg ops.Config) string {
	t.Helper()
	srv := ops.New("127.0.0.1:0", cfg, testenv.Logger(t))
	f.sub.Routes(srv.Mux)
	h, err := srv.Handler()
	require.NoError(t, err)
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestAPIRejectsBadInputAndChangesNothing sends every kind of bad request
// the API knows to a real submitter over HTTP and checks the status, the
// problem's code and type, and that no task, history row, event or type
// setting changed.
func TestAPIRejectsBadInputAndChangesNothing(t *testing.T) {
	f := newFixture(t)
	base := serve(t, f, ops.Config{})
	done := submit(t, f, `{"type":"ax.noop"}`)
	require.Equal(t, http.StatusOK, f.do(t, http.MethodPost, "/v1/tasks/"+done.ID+"/cancel", nil).Code)

	const jsonType = "application/json"
	big := `{"type":"ax.noop","payload":"` + strings.Repeat("x", 2000) + `"}`
	tests := []struct {
		name, method, path, contentType, body string
		status                                int
		code                                  string
		detail                                string
	}{
		{"malformed json", "POST", "/v1/tasks", jsonType, `{"type":`, 400, contracts.CodeMalformedJSON, "not valid JSON"},
		{"unknown type", "POST", "/v1/tasks", jsonType, `{"type":"no.such.type"}`, 400, contracts.CodeUnknownType, "not registered"},
		{"oversized payload", "POST", "/v1/tasks", jsonType, big, 413, contracts.CodePayloadTooLarge, "exceeds"},
		{"negative delay", "POST", "/v1/tasks", jsonType, `{"type":"ax.noop","delay":"-5s"}`, 400, contracts.CodeInvalidArgument, "negative"},
		{"illegal transition", "POST", "/v1/tasks/" + done.ID + "/cancel", jsonType, "", 409, contracts.CodeIllegalTransition, "CANCELLED"},
		{"unknown task id", "GET", "/v1/tasks/12345", "", "", 404, contracts.CodeNotFound, "no task"},
		{"invalid utf-8 payload", "POST", "/v1/tasks", jsonType, "{\"type\":\"ax.noop\",\"payload\":\"\xff\xfe\"}", 400, contracts.CodeMalformedJSON, "UTF-8"},
		{"invalid utf-8 biz key", "POST", "/v1/tasks:batch", jsonType, "{\"tasks\":[{\"type\":\"ax.noop\",\"biz_key\":\"\xc3\"}]}", 400, contracts.CodeMalformedJSON, "UTF-8"},
		{"nanosecond timeout", "POST", "/v1/tasks", jsonType, `{"type":"ax.noop","timeout":"1ns"}`, 400, contracts.CodeInvalidArgument, "at least 1ms"},
		{"sub-millisecond timeout", "POST", "/v1/tasks", jsonType, `{"type":"ax.noop","timeout":"999us"}`, 400, contracts.CodeInvalidArgument, "at least 1ms"},
		{"null body", "POST", "/v1/tasks", jsonType, `null`, 400, contracts.CodeInvalidArgument, "must be a JSON object"},
		{"null type update", "PUT", "/v1/types/ax.noop", jsonType, `null`, 400, contracts.CodeInvalidArgument, "must be a JSON object"},
		{"batch list of the wrong type", "POST", "/v1/tasks:batch", jsonType, `{"tasks":"x"}`, 400, contracts.CodeInvalidArgument, `field "tasks" must be an array`},
		{"wrong content type", "POST", "/v1/tasks", "text/plain", `{"type":"ax.noop"}`, 415, contracts.CodeUnsupportedMediaType, "application/json"},
		{"form content type", "POST", "/v1/tasks:batch", "application/x-www-form-urlencoded", `{"tasks":[{"type":"ax.noop"}]}`, 415, contracts.CodeUnsupportedMediaType, "application/json"},
		{"bodyless cancel without type", "POST", "/v1/tasks/" + done.ID + "/cancel", "", "", 415, contracts.CodeUnsupportedMediaType, "application/json"},
		{"type update without type", "PUT", "/v1/types/ax.noop", "", `{"paused":true}`, 415, contracts.CodeUnsupportedMediaType, "application/json"},
		{"dead-letter retry without type", "POST", "/v1/deadletters/1/retry", "", "", 415, contracts.CodeUnsupportedMediaType, "application/json"},
		{"unknown route", "GET", "/v1/nope", "", "", 404, contracts.CodeNotFound, "no route"},
		{"wrong method", "DELETE", "/v1/tasks/12345", jsonType, "", 405, contracts.CodeMethodNotAllowed, "GET"},
	}
	before := f.rowCounts(t)
	typeBefore := f.do(t, http.MethodGet, "/v1/types/ax.noop", nil).Body.String()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, base+tc.path, strings.NewReader(tc.body))
			require.NoError(t, err)
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			require.Equal(t, tc.status, resp.StatusCode, string(body))
			require.Equal(t, contracts.ProblemContentType, resp.Header.Get("Content-Type"))
			var p contracts.Problem
			require.NoError(t, json.Unmarshal(body, &p), "the answer is not JSON: %q", body)
			require.Equal(t, contracts.Problem{Type: "urn:ax:error:" + tc.code, Title: http.StatusText(tc.status),
				Status: tc.status, Detail: p.Detail, Code: tc.code}, p)
			require.Contains(t, p.Detail, tc.detail)
			require.NotContains(t, p.Detail, "json.", "the detail names a Go type")
		})
	}
	require.Equal(t, before, f.rowCounts(t), "rejected requests changed rows")
	require.JSONEq(t, typeBefore, f.do(t, http.MethodGet, "/v1/types/ax.noop", nil).Body.String(), "a rejected update changed the type")
}

// TestSmallestTimeoutIsKept checks that the smallest timeout accepted, 1ms,
// is stored as given: the refusal of "999us" is the only change.
func TestSmallestTimeoutIsKept(t *testing.T) {
	f := newFixture(t)
	task := submit(t, f, `{"type":"ax.noop","timeout":"1ms"}`)
	require.Equal(t, "1ms", task.Timeout)
}
