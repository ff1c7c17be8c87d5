package submitter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
	"github.com/axsched/ax/services/submitter"
)

func postBatch(t *testing.T, f *fixture, body string) *httptest.ResponseRecorder {
	t.Helper()
	return f.do(t, http.MethodPost, "/v1/tasks:batch", strings.NewReader(body))
}

func batchResponseOf(t *testing.T, rec *httptest.ResponseRecorder) contracts.BatchResponse {
	t.Helper()
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var out contracts.BatchResponse
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	return out
}

// batchOfN is a batch body of n copies of item.
func batchOfN(n int, item string) string {
	items := make([]string, n)
	for i := range items {
		items[i] = item
	}
	return `{"tasks":[` + strings.Join(items, ",") + `]}`
}

func TestBatchReportsEachSubmission(t *testing.T) {
	f := newFixture(t)
	existing := submit(t, f, `{"type":"ax.noop","biz_key":"old"}`)
	before := f.rowCounts(t)

	items := []struct {
		body   string
		status int
		code   string // for rejected items
	}{
		{`{"type":"ax.noop","biz_key":"k0","payload":{"n":0}}`, 201, ""},
		{`{"type":"ax.noop","priority":"urgent"}`, 400, contracts.CodeInvalidArgument},
		{`{"type":"no.such.type"}`, 400, contracts.CodeUnknownType},
		{`{"type":"ax.noop","delay":"-5s"}`, 400, contracts.CodeInvalidArgument},
		{`{"type":"ax.noop","payload":"` + strings.Repeat("x", 2000) + `"}`, 413, contracts.CodePayloadTooLarge},
		{`{"type":"ax.noop","biz_key":"old"}`, 200, ""},
		{`{"type":"ax.noop","biz_key":"k6","priority":"high","delay":"10m"}`, 201, ""},
		{`{"type":"ax.noop","biz_key":"k6","priority":"low"}`, 200, ""},
		{`{"type":"ax.noop"}`, 201, ""},
		{`{"type":"ax.noop","delay_ms":5}`, 400, contracts.CodeInvalidArgument},
		{`[1,2]`, 400, contracts.CodeInvalidArgument},
		{`{"type":"ax.noop","max_retries":"3"}`, 400, contracts.CodeInvalidArgument},
	}
	bodies := make([]string, len(items))
	for i, it := range items {
		bodies[i] = it.body
	}
	out := batchResponseOf(t, postBatch(t, f, `{"tasks":[`+strings.Join(bodies, ",\n")+`]}`))

	require.Len(t, out.Results, len(items))
	require.Equal(t, 3, out.Created)
	require.Equal(t, 2, out.Deduplicated)
	require.Equal(t, 7, out.Rejected)
	for i, it := range items {
		r := out.Results[i]
		require.Equal(t, i, r.Index)
		require.Equal(t, it.status, r.Status, "item %d: %+v", i, r.Error)
		if it.code != "" {
			require.Nil(t, r.Task, "item %d", i)
			require.NotNil(t, r.Error, "item %d", i)
			require.Equal(t, it.code, r.Error.Code, "item %d", i)
			require.Equal(t, it.status, r.Error.Status, "item %d", i)
			require.Equal(t, "urn:ax:error:"+it.code, r.Error.Type, "item %d", i)
			require.NotEmpty(t, r.Error.Detail, "item %d", i)
			continue
		}
		require.Nil(t, r.Error, "item %d", i)
		require.NotNil(t, r.Task, "item %d", i)
		require.Equal(t, it.status == 200, r.Deduplicated, "item %d", i)
		require.Equal(t, it.status == 200, r.Task.Deduplicated, "item %d", i)
		require.Empty(t, r.Task.Payload, "item %d: batch answers leave payloads out", i)
	}
	require.Contains(t, out.Results[9].Error.Detail, "unknown field")
	require.Contains(t, out.Results[10].Error.Detail, "JSON object")
	require.Contains(t, out.Results[11].Error.Detail, "max_retries")
	require.Equal(t, existing.ID, out.Results[5].Task.ID)
	require.Equal(t, out.Results[6].Task.ID, out.Results[7].Task.ID, "the second k6 is deduplicated against the first")
	require.Equal(t, contracts.PriorityHigh, out.Results[7].Task.Priority, "a duplicate answers the task as it was created")
	require.WithinDuration(t, time.Now().Add(10*time.Minute), out.Results[6].Task.NextRunTime, 5*time.Second)

	after := f.rowCounts(t)
	require.Equal(t, [3]int{before[0] + 3, before[1] + 3, before[2] + 3}, after,
		"exactly the valid, non-duplicate items were written")

	rec := f.do(t, http.MethodGet, "/v1/tasks/"+out.Results[0].Task.ID, nil)
	require.Equal(t, http.StatusOK, rec.Code)
	var got contracts.Task
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	require.JSONEq(t, `{"n":0}`, string(got.Payload))
	require.Equal(t, "k0", got.BizKey)

	rec = f.do(t, http.MethodGet, "/v1/tasks/"+out.Results[8].Task.ID+"/history", nil)
	require.Equal(t, http.StatusOK, rec.Code)
	var h contracts.History
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &h))
	require.Len(t, h.History, 1)
	require.Equal(t, "submitter@test", h.History[0].Actor)
	require.Equal(t, contracts.StatusReady, h.History[0].To)
}

func TestBatchAllRejectedWritesNothing(t *testing.T) {
	f := newFixture(t)
	out := batchResponseOf(t, postBatch(t, f, `{"tasks":[{"type":"no.such.type"},{"type":""},null]}`))
	require.Equal(t, contracts.BatchResponse{Results: out.Results, Rejected: 3}, out)
	require.Equal(t, "submission must be a JSON object", out.Results[2].Error.Detail, "null is not a submission without a type")
	require.Equal(t, [3]int{}, f.rowCounts(t))
}

func TestBatchRefusedAsAWholeWritesNothing(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name   string
		body   string
		status int
		code   string
		detail string
	}{
		{"empty list", `{"tasks":[]}`, 400, contracts.CodeInvalidArgument, "between 1 and 1000"},
		{"no list", `{}`, 400, contracts.CodeInvalidArgument, "between 1 and 1000"},
		{"null list", `{"tasks":null}`, 400, contracts.CodeInvalidArgument, "between 1 and 1000"},
		{"one too many", batchOfN(submitter.MaxBatch+1, `{"type":"ax.noop"}`), 400, contracts.CodeInvalidArgument, "1001"},
		{"malformed json", `{"tasks":[{"type":"ax.noop"}`, 400, contracts.CodeMalformedJSON, "not valid JSON"},
		{"item not json", `{"tasks":[{"type":"ax.noop","payload":nope}]}`, 400, contracts.CodeMalformedJSON, "not valid JSON"},
		{"not an object", `[{"type":"ax.noop"}]`, 400, contracts.CodeInvalidArgument, "JSON object"},
		{"unknown field", `{"tasks":[{"type":"ax.noop"}],"atomic":true}`, 400, contracts.CodeInvalidArgument, "unknown field"},
		{"list of the wrong type", `{"tasks":{"type":"ax.noop"}}`, 400, contracts.CodeInvalidArgument, `field "tasks" must be an array`},
		{"null body", `null`, 400, contracts.CodeInvalidArgument, "must be a JSON object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := postBatch(t, f, tc.body)
			require.Equal(t, tc.status, rec.Code, rec.Body.String())
			p := problemOf(t, rec)
			require.Equal(t, tc.code, p.Code)
			require.Contains(t, p.Detail, tc.detail)
		})
	}
	require.Equal(t, [3]int{}, f.rowCounts(t))
}

func TestBatchOverTheBodyLimitIsRefused(t *testing.T) {
	requireOversizedRefused(t, newFixture(t), "/v1/tasks:batch", `{"tasks":[{"type":"ax.noop","payload":"`, 32<<20, 17<<20)
}

func TestBatchOfMaxSizeThroughClient(t *testing.T) {
	f := newFixture(t)
	srv := httptest.NewServer(f.mux)
	t.Cleanup(srv.Close)
	c := client.New(srv.URL)
	ctx := context.Background()

	req := contracts.BatchRequest{Tasks: make([]contracts.SubmitRequest, submitter.MaxBatch)}
	for i := range req.Tasks {
		req.Tasks[i] = contracts.SubmitRequest{Type: "ax.noop", BizKey: fmt.Sprintf("order-%d", i),
			Payload: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))}
	}
	start := time.Now()
	out, err := c.SubmitBatch(ctx, req)
	elapsed := time.Since(start)
	require.NoError(t, err)
	t.Logf("POST /v1/tasks:batch created %d tasks in %s (%.0f tasks/s)", out.Created, elapsed, float64(out.Created)/elapsed.Seconds())
	require.Equal(t, submitter.MaxBatch, out.Created)
	require.Equal(t, [3]int{submitter.MaxBatch, submitter.MaxBatch, submitter.MaxBatch}, f.rowCounts(t))
	ids := map[string]bool{}
	for i, r := range out.Results {
		require.Equal(t, http.StatusCreated, r.Status, "item %d", i)
		ids[r.Task.ID] = true
	}
	require.Len(t, ids, submitter.MaxBatch)

	again, err := c.SubmitBatch(ctx, req)
	require.NoError(t, err)
	require.Equal(t, submitter.MaxBatch, again.Deduplicated)
	for i, r := range again.Results {
		require.Equal(t, out.Results[i].Task.ID, r.Task.ID, "item %d", i)
	}
	require.Equal(t, [3]int{submitter.MaxBatch, submitter.MaxBatch, submitter.MaxBatch}, f.rowCounts(t))

	_, err = c.SubmitBatch(ctx, contracts.BatchRequest{})
	var p *contracts.Problem
	require.ErrorAs(t, err, &p)
	require.Equal(t, contracts.CodeInvalidArgument, p.Code)
}

// TestConcurrentSubmitsWithOneBizKey sends the same business key from many
// clients at once over real connections: the unique index lets exactly one
// create the task, and every other answer is that task, deduplicated.
func TestConcurrentSubmitsWithOneBizKey(t *testing.T) {
	f := newFixture(t)
	srv := httptest.NewServer(f.mux)
	t.Cleanup(srv.Close)
	transport := &http.Transport{MaxIdleConnsPerHost: 64}
	t.Cleanup(transport.CloseIdleConnections)
	hc := &http.Client{Transport: transport, Timeout: 30 * time.Second}

	const racers = 50
	type answer struct {
		status int
		task   contracts.Task
		err    error
	}
	answers := make([]answer, racers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range racers {
		wg.Go(func() {
			<-start
			resp, err := hc.Post(srv.URL+"/v1/tasks", "application/json",
				strings.NewReader(`{"type":"ax.noop","biz_key":"order-42"}`))
			if err != nil {
				answers[i].err = err
				return
			}
			defer resp.Body.Close()
			answers[i].status = resp.StatusCode
			answers[i].err = json.NewDecoder(resp.Body).Decode(&answers[i].task)
		})
	}
	close(start)
	wg.Wait()

	created, deduplicated := 0, 0
	for i, a := range answers {
		require.NoError(t, a.err, "racer %d", i)
		require.Equal(t, answers[0].task.ID, a.task.ID, "racer %d got another task", i)
		switch a.status {
		case http.StatusCreated:
			created++
			require.False(t, a.task.Deduplicated)
		case http.StatusOK:
			deduplicated++
			require.True(t, a.task.Deduplicated, "racer %d", i)
		default:
			t.Fatalf("racer %d: status %d", i, a.status)
		}
	}
	require.Equal(t, 1, created, "exactly one submission creates the task")
	require.Equal(t, racers-1, deduplicated)
	require.Equal(t, [3]int{1, 1, 1}, f.rowCounts(t), "one task, one history row, one event")
}
