package submitter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/idgen"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
	"github.com/axsched/ax/services/submitter"
)

type fixture struct {
	st  *store.Store
	sub *submitter.Submitter
	mux *http.ServeMux
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureWith(t, store.Options{Actor: "test"})
}

// newFixtureWith is newFixture on a store opened with opts.
func newFixtureWith(t *testing.T, opts store.Options) *fixture {
	t.Helper()
	st, _ := testenv.StoreWith(t, opts)
	require.NoError(t, st.RegisterType(context.Background(), store.TaskType{Name: "ax.noop", TimeoutMs: 60000, MaxRetries: 3, Priority: contracts.PriorityNormal}))
	ids, err := idgen.New(1)
	require.NoError(t, err)
	mux := http.NewServeMux()
	sub := submitter.New(submitter.Config{Node: "test", MaxPayload: 1024, MaxHorizon: time.Hour}, st, ids, clock.System{}, testenv.Logger(t))
	sub.Routes(mux)
	return &fixture{st: st, sub: sub, mux: mux}
}

func (f *fixture) do(t *testing.T, method, path string, body io.Reader) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(method, path, body)
	rec := httptest.NewRecorder()
	f.mux.ServeHTTP(rec, req)
	return rec
}

// rowCounts is the whole observable state: tasks, history rows, and events
// waiting for the relay (none runs here). A rejected request must not
// change it.
func (f *fixture) rowCounts(t *testing.T) [3]int {
	t.Helper()
	var c [3]int
	for i, table := range []string{"tasks", "task_history"} {
		require.NoError(t, f.st.DB().QueryRow("SELECT COUNT(*) FROM "+table).Scan(&c[i]))
	}
	events, err := store.CountUnpublished(context.Background(), f.st.DB())
	require.NoError(t, err)
	c[2] = int(events)
	return c
}

func problemOf(t *testing.T, rec *httptest.ResponseRecorder) contracts.Problem {
	t.Helper()
	require.Equal(t, contracts.ProblemContentType, rec.Header().Get("Content-Type"), rec.Body.String())
	var p contracts.Problem
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
	require.NotEmpty(t, p.Detail)
	return p
}

func TestSubmitRejectsBadInputAndChangesNothing(t *testing.T) {
	f := newFixture(t)
	big := `{"type":"ax.noop","payload":"` + strings.Repeat("x", 2000) + `"}`
	tests := []struct {
		name   string
		body   string
		status int
		code   string
		detail string
	}{
		{"malformed json", `{"type":`, 400, contracts.CodeMalformedJSON, "not valid JSON"},
		{"not an object", `[1,2]`, 400, contracts.CodeInvalidArgument, "JSON object"},
		{"two values", `{"type":"ax.noop"} {}`, 400, contracts.CodeMalformedJSON, "more than one"},
		{"missing type", `{}`, 400, contracts.CodeInvalidArgument, "type is required"},
		{"unknown type", `{"type":"no.such.type"}`, 400, contracts.CodeUnknownType, "not registered"},
		{"invalid type name", `{"type":"Bad Type"}`, 400, contracts.CodeInvalidArgument, "invalid"},
		{"payload not json", `{"type":"ax.noop","payload":nope}`, 400, contracts.CodeMalformedJSON, "not valid JSON"},
		{"payload too large", big, 413, contracts.CodePayloadTooLarge, "exceeds"},
		{"negative delay", `{"type":"ax.noop","delay":"-5s"}`, 400, contracts.CodeInvalidArgument, "negative"},
		{"unparsable delay", `{"type":"ax.noop","delay":"soon"}`, 400, contracts.CodeInvalidArgument, "not a duration"},
		{"delay and run_at", `{"type":"ax.noop","delay":"1s","run_at":"2030-01-01T00:00:00Z"}`, 400, contracts.CodeInvalidArgument, "not both"},
		{"unparsable run_at", `{"type":"ax.noop","run_at":"tomorrow"}`, 400, contracts.CodeInvalidArgument, "RFC 3339"},
		{"beyond horizon", `{"type":"ax.noop","delay":"2h"}`, 400, contracts.CodeInvalidArgument, "horizon"},
		{"unknown priority", `{"type":"ax.noop","priority":"urgent"}`, 400, contracts.CodeInvalidArgument, "unknown priority"},
		{"unknown field", `{"type":"ax.noop","delay_ms":5}`, 400, contracts.CodeInvalidArgument, "unknown field"},
		{"wrong field type", `{"type":"ax.noop","max_retries":"3"}`, 400, contracts.CodeInvalidArgument, "max_retries"},
		{"negative retries", `{"type":"ax.noop","max_retries":-1}`, 400, contracts.CodeInvalidArgument, "max_retries"},
		{"zero timeout", `{"type":"ax.noop","timeout":"0s"}`, 400, contracts.CodeInvalidArgument, "timeout"},
		{"long biz key", `{"type":"ax.noop","biz_key":"` + strings.Repeat("k", 256) + `"}`, 400, contracts.CodeInvalidArgument, "biz_key"},
		{"malformed traceparent", `{"type":"ax.noop","traceparent":"00-abc-def-01"}`, 400, contracts.CodeInvalidArgument, "W3C trace context"},
	}
	before := f.rowCounts(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := f.do(t, http.MethodPost, "/v1/tasks", strings.NewReader(tc.body))
			require.Equal(t, tc.status, rec.Code, rec.Body.String())
			p := problemOf(t, rec)
			require.Equal(t, tc.code, p.Code)
			require.Equal(t, tc.status, p.Status)
			require.Contains(t, p.Detail, tc.detail)
		})
	}
	require.Equal(t, before, f.rowCounts(t), "rejected submissions changed rows")
}

// countingReader counts how much of a huge body the server consumed.
type countingReader struct {
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	c.n += int64(len(p))
	return len(p), nil
}

// requireOversizedRefused posts a huge body to path twice: with a declared
// length over the limit (refused before a byte is read) and with an unknown
// length after prefix (reading stops once maxRead bytes are consumed). It
// checks that nothing was written.
func requireOversizedRefused(t *testing.T, f *fixture, path, prefix string, huge, maxRead int64) {
	t.Helper()
	body := &countingReader{}
	req := httptest.NewRequest(http.MethodPost, path, io.LimitReader(body, huge))
	req.ContentLength = huge
	rec := httptest.NewRecorder()
	f.mux.ServeHTTP(rec, req)
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	require.Zero(t, body.n, "a declared oversized body must not be read")

	body = &countingReader{}
	req = httptest.NewRequest(http.MethodPost, path, io.MultiReader(strings.NewReader(prefix), io.LimitReader(body, huge)))
	req.ContentLength = -1
	rec = httptest.NewRecorder()
	f.mux.ServeHTTP(rec, req)
	require.Equal(t, http.StatusRequestEntityTooLarge, rec.Code)
	require.Equal(t, contracts.CodePayloadTooLarge, problemOf(t, rec).Code)
	require.LessOrEqual(t, body.n, maxRead, "read %d bytes of a %d-byte body", body.n, huge)
	require.Equal(t, [3]int{}, f.rowCounts(t))
}

func TestOversizedBodyIsRejectedBeforeReadingIt(t *testing.T) {
	requireOversizedRefused(t, newFixture(t), "/v1/tasks", `{"type":"ax.noop","payload":"`, 10<<20, 64<<10)
}

func TestUnknownTaskIsNotFound(t *testing.T) {
	f := newFixture(t)
	for _, tc := range []struct{ method, path string }{
		{http.MethodGet, "/v1/tasks/12345"},
		{http.MethodGet, "/v1/tasks/12345/history"},
		{http.MethodPost, "/v1/tasks/12345/cancel"},
		{http.MethodGet, "/v1/tasks/not-a-number"},
		{http.MethodGet, "/v1/tasks/-4"},
	} {
		rec := f.do(t, tc.method, tc.path, nil)
		require.Equal(t, http.StatusNotFound, rec.Code, "%s %s", tc.method, tc.path)
		require.Equal(t, contracts.CodeNotFound, problemOf(t, rec).Code)
	}
}

func submit(t *testing.T, f *fixture, body string) contracts.Task {
	t.Helper()
	rec := f.do(t, http.MethodPost, "/v1/tasks", strings.NewReader(body))
	require.Contains(t, []int{200, 201}, rec.Code, rec.Body.String())
	var task contracts.Task
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &task))
	return task
}

func TestSubmitGetHistoryCancel(t *testing.T) {
	f := newFixture(t)
	task := submit(t, f, `{"type":"ax.noop","payload":{"n":1},"priority":"high","delay":"10m","biz_key":"order-1","max_retries":5,"timeout":"90s"}`)
	require.Equal(t, contracts.StatusReady, task.Status)
	require.Equal(t, contracts.PriorityHigh, task.Priority)
	require.Equal(t, 5, task.MaxRetries)
	require.Equal(t, "1m30s", task.Timeout)
	require.JSONEq(t, `{"n":1}`, string(task.Payload))
	require.WithinDuration(t, time.Now().Add(10*time.Minute), task.NextRunTime, 5*time.Second)

	again := submit(t, f, `{"type":"ax.noop","biz_key":"order-1"}`)
	require.True(t, again.Deduplicated)
	require.Equal(t, task.ID, again.ID)

	rec := f.do(t, http.MethodPost, "/v1/tasks/"+task.ID+"/cancel", nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var cancelled contracts.Task
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &cancelled))
	require.Equal(t, contracts.StatusCancelled, cancelled.Status)

	before := f.rowCounts(t)
	rec = f.do(t, http.MethodPost, "/v1/tasks/"+task.ID+"/cancel", nil)
	require.Equal(t, http.StatusConflict, rec.Code)
	require.Equal(t, contracts.CodeIllegalTransition, problemOf(t, rec).Code)
	require.Equal(t, before, f.rowCounts(t))

	rec = f.do(t, http.MethodGet, "/v1/tasks/"+task.ID+"/history", nil)
	require.Equal(t, http.StatusOK, rec.Code)
	var h contracts.History
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &h))
	require.Len(t, h.History, 2)
	require.Equal(t, contracts.StatusReady, h.History[0].To)
	require.Equal(t, "submitter@test", h.History[0].Actor)
	require.Equal(t, contracts.StatusCancelled, h.History[1].To)
	require.Equal(t, contracts.StatusReady, h.History[1].From)
}

func TestCancelOfSucceededTaskIsConflict(t *testing.T) {
	f := newFixture(t)
	task := submit(t, f, `{"type":"ax.noop"}`)
	ctx := context.Background()
	var id int64
	require.NoError(t, json.Unmarshal([]byte(task.ID), &id))
	zero, one := 0, 1
	_, err := f.st.Transfer(ctx, store.TransferParams{TaskID: id, From: contracts.StatusReady, To: contracts.StatusRunning, Attempt: &zero, Claim: true, Executor: "x", Reason: "t"})
	require.NoError(t, err)
	_, err = f.st.Transfer(ctx, store.TransferParams{TaskID: id, From: contracts.StatusRunning, To: contracts.StatusSuccess, Attempt: &one, Reason: "t"})
	require.NoError(t, err)

	before := f.rowCounts(t)
	rec := f.do(t, http.MethodPost, "/v1/tasks/"+task.ID+"/cancel", bytes.NewReader(nil))
	require.Equal(t, http.StatusConflict, rec.Code)
	p := problemOf(t, rec)
	require.Equal(t, contracts.CodeIllegalTransition, p.Code)
	require.Contains(t, p.Detail, "SUCCESS")
	require.Equal(t, before, f.rowCounts(t))
}
