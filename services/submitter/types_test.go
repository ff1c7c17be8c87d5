package submitter_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// typeState is everything a type update may write: every task_types row,
// every column, and every outbox row. A rejected request must leave it equal.
func (f *fixture) typeState(t *testing.T) []string {
	t.Helper()
	return f.rowsOf(t,
		`SELECT CONCAT_WS('|', name, timeout_ms, max_retries, priority, concurrency, backoff_base_ms,
			backoff_cap_ms, fail_silently, paused, created_at, updated_at) FROM task_types ORDER BY name`,
		`SELECT CONCAT_WS('|', event_id, subject, event_type, correlation_id, HEX(payload)) FROM outbox ORDER BY id`)
}

// rowsOf is the rows the queries answer, one string a row, in order.
func (f *fixture) rowsOf(t *testing.T, queries ...string) []string {
	t.Helper()
	var state []string
	for _, q := range queries {
		state = append(state, testenv.Column[string](t, f.st.DB(), q)...)
	}
	return state
}

func decodeType(t *testing.T, body []byte) contracts.TaskType {
	t.Helper()
	var tt contracts.TaskType
	require.NoError(t, json.Unmarshal(body, &tt), string(body))
	return tt
}

func TestTypeUpdateGetListRoundTrip(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.st.RegisterType(context.Background(), store.TaskType{
		Name: "file.export", TimeoutMs: 1_800_000, MaxRetries: 3, Priority: contracts.PriorityLow,
	}))

	rec := f.do(t, http.MethodPut, "/v1/types/ax.noop", strings.NewReader(`{"timeout":"30s","max_retries":5,
		"priority":"high","concurrency":10,"backoff_base":"2s","backoff_cap":"1m","fail_silently":true,"paused":true}`))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	put := decodeType(t, rec.Body.Bytes())
	require.Equal(t, contracts.TaskType{Name: "ax.noop", Timeout: "30s", MaxRetries: 5, Priority: contracts.PriorityHigh,
		Concurrency: 10, BackoffBase: "2s", BackoffCap: "1m0s", FailSilently: true, Paused: true,
		UpdatedAt: put.UpdatedAt}, put)
	require.False(t, put.UpdatedAt.IsZero())

	rec = f.do(t, http.MethodGet, "/v1/types/ax.noop", nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, put, decodeType(t, rec.Body.Bytes()), "GET answers what PUT stored")

	// A partial update keeps every field it does not name.
	rec = f.do(t, http.MethodPut, "/v1/types/ax.noop", strings.NewReader(`{"paused":false,"concurrency":0}`))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	resumed := decodeType(t, rec.Body.Bytes())
	want := put
	want.Paused, want.Concurrency, want.UpdatedAt = false, 0, resumed.UpdatedAt
	require.Equal(t, want, resumed)

	rec = f.do(t, http.MethodGet, "/v1/types", nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var list contracts.TaskTypeList
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &list))
	require.Len(t, list.Types, 2)
	require.Equal(t, resumed, list.Types[0], "ordered by name: ax.noop first")
	require.Equal(t, "file.export", list.Types[1].Name)
	require.Equal(t, "30m0s", list.Types[1].Timeout)

	var evs []events.TaskTypeChanged
	rows, err := f.st.DB().Query(`SELECT subject, correlation_id, payload FROM outbox ORDER BY id`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var subject, corr string
		var payload []byte
		require.NoError(t, rows.Scan(&subject, &corr, &payload))
		require.Equal(t, events.SubjectTypeChanged, subject)
		require.Equal(t, "ax.noop", corr)
		var ev events.TaskTypeChanged
		require.NoError(t, events.Decode(payload, &ev))
		evs = append(evs, ev)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []events.TaskTypeChanged{
		{Name: "ax.noop", Paused: true, Concurrency: 10, Actor: "submitter@test", At: put.UpdatedAt},
		{Name: "ax.noop", Paused: false, Concurrency: 0, Actor: "submitter@test", At: resumed.UpdatedAt},
	}, evs, "one event per accepted PUT")
}

func TestTypeListIsEmptyArrayWithoutTypes(t *testing.T) {
	f := newFixture(t)
	_, err := f.st.DB().Exec(`DELETE FROM task_types`)
	require.NoError(t, err)
	rec := f.do(t, http.MethodGet, "/v1/types", nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.JSONEq(t, `{"types":[]}`, rec.Body.String())
}

func TestTypeUpdateRejectsBadInputAndChangesNothing(t *testing.T) {
	tests := []struct {
		name   string
		typ    string
		body   string
		status int
		code   string
		detail string
	}{
		{"zero timeout", "ax.noop", `{"timeout":"0s"}`, 400, contracts.CodeInvalidArgument, "timeout must be > 0"},
		{"negative timeout", "ax.noop", `{"timeout":"-5s"}`, 400, contracts.CodeInvalidArgument, "timeout must be > 0"},
		{"sub-millisecond timeout", "ax.noop", `{"timeout":"500us"}`, 400, contracts.CodeInvalidArgument, "at least 1ms"},
		{"timeout over 24h", "ax.noop", `{"timeout":"25h"}`, 400, contracts.CodeInvalidArgument, "at most 24h"},
		{"unparsable timeout", "ax.noop", `{"timeout":"soon"}`, 400, contracts.CodeInvalidArgument, "not a Go duration"},
		{"negative max_retries", "ax.noop", `{"max_retries":-1}`, 400, contracts.CodeInvalidArgument, "between 0 and 100"},
		{"max_retries over 100", "ax.noop", `{"max_retries":101}`, 400, contracts.CodeInvalidArgument, "between 0 and 100"},
		{"negative concurrency", "ax.noop", `{"concurrency":-1}`, 400, contracts.CodeInvalidArgument, "0 means unlimited"},
		{"unknown priority", "ax.noop", `{"priority":"urgent"}`, 400, contracts.CodeInvalidArgument, "unknown priority"},
		{"empty priority", "ax.noop", `{"priority":""}`, 400, contracts.CodeInvalidArgument, "unknown priority"},
		{"zero backoff_base", "ax.noop", `{"backoff_base":"0s"}`, 400, contracts.CodeInvalidArgument, "backoff_base must be > 0"},
		{"backoff_cap below backoff_base", "ax.noop", `{"backoff_base":"10s","backoff_cap":"1s"}`, 400, contracts.CodeInvalidArgument, "backoff_cap (1s) must be >= backoff_base (10s)"},
		{"backoff_cap below stored base", "ax.noop", `{"backoff_cap":"500ms"}`, 400, contracts.CodeInvalidArgument, "stored backoff_base"},
		{"backoff_base above stored cap", "ax.noop", `{"backoff_base":"11m"}`, 400, contracts.CodeInvalidArgument, "stored backoff_cap"},
		{"backoff_cap over 24h", "ax.noop", `{"backoff_cap":"48h"}`, 400, contracts.CodeInvalidArgument, "at most 24h"},
		{"every error at once", "ax.noop", `{"timeout":"0s","concurrency":-2}`, 400, contracts.CodeInvalidArgument, "timeout must be > 0, got \"0s\"; concurrency"},
		{"empty update", "ax.noop", `{}`, 400, contracts.CodeInvalidArgument, "nothing to change"},
		{"only nulls", "ax.noop", `{"paused":null}`, 400, contracts.CodeInvalidArgument, "nothing to change"},
		{"unknown field", "ax.noop", `{"paused":true,"pause":true}`, 400, contracts.CodeInvalidArgument, `unknown field "pause"`},
		{"renaming is not a field", "ax.noop", `{"name":"ax.other"}`, 400, contracts.CodeInvalidArgument, `unknown field "name"`},
		{"wrong JSON type", "ax.noop", `{"paused":"yes"}`, 400, contracts.CodeInvalidArgument, `"paused"`},
		{"not an object", "ax.noop", `[true]`, 400, contracts.CodeInvalidArgument, "JSON object"},
		{"malformed JSON", "ax.noop", `{"paused":`, 400, contracts.CodeMalformedJSON, "not valid JSON"},
		{"empty body", "ax.noop", ``, 400, contracts.CodeMalformedJSON, "not valid JSON"},
		{"two values", "ax.noop", `{"paused":true} {}`, 400, contracts.CodeMalformedJSON, "more than one"},
		{"body over 16 KiB", "ax.noop", `{"timeout":"` + strings.Repeat("1", 17<<10) + `s"}`, 413, contracts.CodePayloadTooLarge, "exceeds"},
		{"unknown type", "no.such.type", `{"paused":true}`, 404, contracts.CodeNotFound, `no task type "no.such.type"`},
	}
	f := newFixture(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := f.typeState(t)
			rec := f.do(t, http.MethodPut, "/v1/types/"+tc.typ, strings.NewReader(tc.body))
			require.Equal(t, tc.status, rec.Code, rec.Body.String())
			p := problemOf(t, rec)
			require.Equal(t, tc.code, p.Code)
			require.Equal(t, tc.status, p.Status)
			require.Contains(t, p.Detail, tc.detail)
			require.Equal(t, before, f.typeState(t), "task_types and outbox unchanged")
		})
	}
	rec := f.do(t, http.MethodGet, "/v1/types/no.such.type", nil)
	require.Equal(t, http.StatusNotFound, rec.Code, "a PUT on an unknown type creates nothing")
	require.Equal(t, contracts.CodeNotFound, problemOf(t, rec).Code)
}

// TestTypeClientAgainstHandlers runs the Go client against the real handlers,
// so the two agree on paths, bodies and errors.
func TestTypeClientAgainstHandlers(t *testing.T) {
	f := newFixture(t)
	srv := httptest.NewServer(f.mux)
	t.Cleanup(srv.Close)
	c := client.New(srv.URL)
	ctx := context.Background()

	got, err := c.UpdateType(ctx, "ax.noop", contracts.TaskTypeUpdate{Paused: new(true), Timeout: new("45s")})
	require.NoError(t, err)
	require.True(t, got.Paused)
	require.Equal(t, "45s", got.Timeout)

	one, err := c.GetType(ctx, "ax.noop")
	require.NoError(t, err)
	require.Equal(t, got, one)

	all, err := c.ListTypes(ctx)
	require.NoError(t, err)
	require.Equal(t, []contracts.TaskType{*got}, all)

	_, err = c.UpdateType(ctx, "ax.noop", contracts.TaskTypeUpdate{Concurrency: new(-1)})
	var p *contracts.Problem
	require.ErrorAs(t, err, &p)
	require.Equal(t, contracts.CodeInvalidArgument, p.Code)

	_, err = c.GetType(ctx, "no.such.type")
	require.ErrorAs(t, err, &p)
	require.Equal(t, contracts.CodeNotFound, p.Code)
}
