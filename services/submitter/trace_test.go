package submitter_test

import (
	"database/sql"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
)

// TestSubmitStoresTheCallersTraceContext: with tracing off (no exporter)
// the caller's trace context is still kept with the task and its first
// history row, from the traceparent field or else the request's header; a
// malformed header is ignored, as W3C trace context asks.
func TestSubmitStoresTheCallersTraceContext(t *testing.T) {
	const field = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	const header = "00-11111111111111111111111111111111-2222222222222222-01"
	f := newFixture(t)
	for _, tc := range []struct {
		name, body, header, want string
	}{
		{"field", `{"type":"ax.noop","traceparent":"` + field + `"}`, "", field},
		{"header", `{"type":"ax.noop"}`, header, header},
		{"field wins", `{"type":"ax.noop","traceparent":"` + field + `"}`, header, field},
		{"malformed header ignored", `{"type":"ax.noop"}`, "nonsense", ""},
		{"none", `{"type":"ax.noop"}`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodPost, "/v1/tasks", strings.NewReader(tc.body))
			if tc.header != "" {
				req.Header.Set("traceparent", tc.header)
			}
			rec := httptest.NewRecorder()
			f.mux.ServeHTTP(rec, req)
			require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
			var created contracts.Task
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &created))
			id := created.ID
			var task, history sql.NullString
			require.NoError(t, f.st.DB().QueryRow(`SELECT trace_parent FROM tasks WHERE id = ?`, id).Scan(&task))
			require.NoError(t, f.st.DB().QueryRow(`SELECT trace_parent FROM task_history WHERE task_id = ?`, id).Scan(&history))
			require.Equal(t, tc.want, task.String)
			require.Equal(t, tc.want, history.String)
			if tc.want != "" {
				require.Equal(t, tc.want[3:35], created.TraceID, "the API shows the trace ID")
			} else {
				require.Empty(t, created.TraceID)
			}
		})
	}
	rec := f.do(t, http.MethodPost, "/v1/tasks:batch", strings.NewReader(
		`{"tasks":[{"type":"ax.noop","traceparent":"`+field+`"},{"type":"ax.noop"}]}`))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var traced, untraced int
	require.NoError(t, f.st.DB().QueryRow(`SELECT COUNT(*) FROM tasks WHERE trace_parent = ?`, field).Scan(&traced))
	require.Equal(t, 3, traced, "the field's task of the batch and the two above")
	require.NoError(t, f.st.DB().QueryRow(`SELECT COUNT(*) FROM tasks WHERE trace_parent IS NULL`).Scan(&untraced))
	require.Equal(t, 3, untraced)
}

// TestWorkflowStepsShareTheCallersTrace: a workflow is one trace; with
// tracing off every step keeps the request's header as it came.
func TestWorkflowStepsShareTheCallersTrace(t *testing.T) {
	const header = "00-11111111111111111111111111111111-2222222222222222-01"
	f := newFixture(t)
	req := httptest.NewRequest(http.MethodPost, "/v1/workflows", strings.NewReader(`{"name":"traced","steps":[
		{"key":"a","type":"ax.noop"},{"key":"b","type":"ax.noop","depends_on":["a"]}]}`))
	req.Header.Set("traceparent", header)
	rec := httptest.NewRecorder()
	f.mux.ServeHTTP(rec, req)
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	var n int
	require.NoError(t, f.st.DB().QueryRow(`SELECT COUNT(*) FROM tasks WHERE trace_parent = ?`, header).Scan(&n))
	require.Equal(t, 2, n, "both steps joined the caller's trace")
}
