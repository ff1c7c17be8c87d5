package main

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
)

func TestSizePool(t *testing.T) {
	tests := []struct {
		name       string
		throughput float64
		latency    time.Duration
		peak       float64
		workers    int
		queue      int
	}{
		{"the documented example", 200, 300 * time.Millisecond, 200, 78, 100},
		{"exact product is not rounded up", 1000, time.Second, 1000, 1300, 500},
		{"fraction rounds up", 1, time.Second, 1, 2, 1},
		{"tiny load still needs a worker", 0.1, time.Millisecond, 0.1, 1, 1},
		{"fractional throughput", 2.5, 2 * time.Second, 2.5, 7, 2},
		{"peak larger than throughput", 200, 300 * time.Millisecond, 1000, 78, 500},
		{"odd peak rounds up", 100, 50 * time.Millisecond, 7, 7, 4},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := sizePool(tc.throughput, tc.latency, tc.peak)
			require.NoError(t, err)
			require.Equal(t, tc.workers, s.Workers, "workers")
			require.Equal(t, tc.queue, s.Queue, "queue")
			require.Equal(t, 1.3, s.Headroom)
			require.Equal(t, tc.latency.String(), s.Latency)
		})
	}
}

func TestSizePoolRejectsNonPositiveInput(t *testing.T) {
	tests := []struct {
		name       string
		throughput float64
		latency    time.Duration
		peak       float64
		want       string
	}{
		{"zero throughput", 0, time.Second, 1, "--throughput must be > 0"},
		{"negative throughput", -5, time.Second, 1, "--throughput must be > 0"},
		{"NaN throughput", math.NaN(), time.Second, 1, "--throughput must be > 0"},
		{"infinite throughput", math.Inf(1), time.Second, 1, "--throughput must be > 0"},
		{"zero latency", 200, 0, 1, "--latency must be > 0"},
		{"negative latency", 200, -time.Second, 1, "--latency must be > 0"},
		{"zero peak", 200, time.Second, 0, "--peak must be > 0"},
		{"overflow", 1e300, time.Second, 1, "more workers than a pool can hold"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sizePool(tc.throughput, tc.latency, tc.peak)
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// runAx runs the CLI in process and returns what it printed.
func runAx(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	return out.String(), err
}

func TestTypeSizeCommand(t *testing.T) {
	out, err := runAx(t, "type", "size", "--throughput", "200", "--latency", "300ms")
	require.NoError(t, err)
	require.Contains(t, out, "ceil(throughput × latency × 1.3)")
	require.Contains(t, out, "ceil(200/s × 300ms × 1.3)")
	require.Contains(t, out, "= 78\n")
	require.Contains(t, out, "ceil(200 ÷ 2)")
	require.Contains(t, out, "= 100\n")

	out, err = runAx(t, "type", "size", "--throughput", "200", "--latency", "300ms", "--peak", "1000", "-o", "json")
	require.NoError(t, err)
	var s poolSizing
	require.NoError(t, json.Unmarshal([]byte(out), &s))
	require.Equal(t, poolSizing{Throughput: 200, Latency: "300ms", Headroom: 1.3, Workers: 78, PeakBacklog: 1000, Queue: 500}, s)

	_, err = runAx(t, "type", "size", "--latency", "300ms")
	require.ErrorContains(t, err, "--throughput must be > 0")
	_, err = runAx(t, "type", "size", "--throughput", "200")
	require.ErrorContains(t, err, "--latency must be > 0")
}

// fakeTypeAPI records the requests the CLI sends and answers like the
// submitter.
type fakeTypeAPI struct {
	*httptest.Server
	mu       sync.Mutex
	requests []string
}

func newFakeTypeAPI(t *testing.T) *fakeTypeAPI {
	t.Helper()
	f := &fakeTypeAPI{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.requests = append(f.requests, r.Method+" "+r.URL.Path+" "+string(b))
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/v1/types" {
			_ = json.NewEncoder(w).Encode(contracts.TaskTypeList{Types: []contracts.TaskType{{Name: "sms.send", Timeout: "30s"}}})
			return
		}
		name := strings.TrimPrefix(r.URL.Path, "/v1/types/")
		_ = json.NewEncoder(w).Encode(contracts.TaskType{Name: name, Timeout: "30s"})
	}))
	t.Cleanup(f.Close)
	return f
}

// sent returns the requests received since the last call and forgets them.
func (f *fakeTypeAPI) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.requests
	f.requests = nil
	return out
}

func TestTypeCommandsSendOnlyWhatWasGiven(t *testing.T) {
	api := newFakeTypeAPI(t)
	tests := []struct {
		args []string
		sent string
	}{
		{[]string{"set", "sms.send", "--timeout", "30s", "--fail-silently=false"},
			`PUT /v1/types/sms.send {"timeout":"30s","fail_silently":false}`},
		{[]string{"set", "sms.send", "--max-retries", "0", "--concurrency", "0", "--priority", "high",
			"--backoff-base", "1s", "--backoff-cap", "10m", "--fail-silently"},
			`PUT /v1/types/sms.send {"max_retries":0,"priority":"high","concurrency":0,"backoff_base":"1s","backoff_cap":"10m","fail_silently":true}`},
		{[]string{"pause", "sms.send"}, `PUT /v1/types/sms.send {"paused":true}`},
		{[]string{"resume", "sms.send"}, `PUT /v1/types/sms.send {"paused":false}`},
		{[]string{"get", "sms.send"}, `GET /v1/types/sms.send `},
		{[]string{"list"}, `GET /v1/types `},
	}
	for _, tc := range tests {
		t.Run(tc.args[0], func(t *testing.T) {
			out, err := runAx(t, append(append([]string{"type"}, tc.args...), "--api", api.URL)...)
			require.NoError(t, err)
			require.Equal(t, []string{tc.sent}, api.sent())
			require.Contains(t, out, "sms.send")
		})
	}

	_, err := runAx(t, "type", "set", "sms.send", "--api", api.URL)
	require.ErrorContains(t, err, "nothing to change")
	require.Empty(t, api.sent(), "no request without a change")
}
