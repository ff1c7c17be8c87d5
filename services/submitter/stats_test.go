package submitter_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/idgen"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
	"github.com/axsched/ax/services/submitter"
)

// TestStatsCountsAndCaches submits tasks and reads the counts per type and
// state and the lanes' backlogs; a submission within the TTL is not seen,
// and is once the clock passed it.
func TestStatsCountsAndCaches(t *testing.T) {
	ctx := context.Background()
	st, _ := testenv.Store(t)
	for _, name := range []string{"stats.a", "stats.b"} {
		require.NoError(t, st.RegisterType(ctx, store.TaskType{Name: name, TimeoutMs: 60000, MaxRetries: 3, Priority: contracts.PriorityNormal}))
	}
	ids, err := idgen.New(1)
	require.NoError(t, err)
	clk := &testenv.Clock{}
	mux := http.NewServeMux()
	submitter.New(submitter.Config{Node: "test", StatsTTL: time.Minute, FinishedStatsTTL: 10 * time.Minute}, st, ids, clk, testenv.Logger(t)).Routes(mux)
	submit := func(body string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/tasks", strings.NewReader(body)))
		require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	}
	stats := func() contracts.Stats { return readStats(t, mux) }
	submit(`{"type":"stats.a"}`)
	submit(`{"type":"stats.a","priority":"high"}`)
	submit(`{"type":"stats.b","delay":"10m"}`)

	s := stats()
	require.Equal(t, []contracts.TypeStats{
		{Type: "stats.a", Counts: map[contracts.Status]int64{contracts.StatusReady: 2}},
		{Type: "stats.b", Counts: map[contracts.Status]int64{contracts.StatusReady: 1}},
	}, s.Types)
	require.Len(t, s.Lanes, 3)
	backlog := map[contracts.Priority]int64{}
	for _, l := range s.Lanes {
		backlog[l.Priority] = l.Backlog
		require.Equal(t, l.Backlog > 0, l.OldestDue != nil)
	}
	require.Equal(t, map[contracts.Priority]int64{"high": 1, "normal": 1, "low": 0}, backlog, "the delayed task is not due yet")

	submit(`{"type":"stats.b"}`)
	_, err = st.DB().Exec(`UPDATE tasks SET status = 'SUCCESS' WHERE task_type = 'stats.a' AND priority = 0`)
	require.NoError(t, err)
	require.Equal(t, s, stats(), "within the TTL the reading is reused")
	clk.Skip(time.Minute)
	s = stats()
	require.Equal(t, map[contracts.Status]int64{contracts.StatusReady: 2}, s.Types[1].Counts, "unfinished states are read again")
	require.Equal(t, map[contracts.Status]int64{contracts.StatusReady: 1}, s.Types[0].Counts,
		"the finished count is a minute old: the task left READY, its SUCCESS is not counted yet")
	clk.Skip(10 * time.Minute)
	s = stats()
	require.Equal(t, map[contracts.Status]int64{contracts.StatusReady: 1}, s.Types[0].Counts,
		"a stale finished count is answered at once while it is counted again")
	testenv.Eventually(t, 10*time.Second, "the finished count replaced in the background", func() bool {
		s = stats()
		return s.Types[0].Counts[contracts.StatusSuccess] == 1
	})
	require.Equal(t, map[contracts.Status]int64{contracts.StatusReady: 1, contracts.StatusSuccess: 1}, s.Types[0].Counts)
	require.True(t, s.FinishedAt.After(s.At.Add(-time.Second)), "both read just now")
}

// TestStatsCountWorkflows: workflows per state, the moving ones read with
// the work in progress, the ended ones with the finished tasks.
func TestStatsCountWorkflows(t *testing.T) {
	ctx := context.Background()
	st, _ := testenv.Store(t)
	require.NoError(t, st.RegisterType(ctx, store.TaskType{Name: "stats.w", TimeoutMs: 60000, MaxRetries: 0, Priority: contracts.PriorityNormal}))
	ids, err := idgen.New(1)
	require.NoError(t, err)
	clk := &testenv.Clock{}
	mux := http.NewServeMux()
	submitter.New(submitter.Config{Node: "test", StatsTTL: time.Minute, FinishedStatsTTL: 10 * time.Minute}, st, ids, clk, testenv.Logger(t)).Routes(mux)
	workflow := func() contracts.Workflow {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/workflows", strings.NewReader(
			`{"name":"w","steps":[{"key":"a","type":"stats.w"},{"key":"b","type":"stats.w","depends_on":["a"]}]}`)))
		require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
		var wf contracts.Workflow
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &wf))
		return wf
	}
	stats := func() contracts.Stats { return readStats(t, mux) }
	require.Empty(t, stats().Workflows, "no workflow, no count")
	clk.Skip(10 * time.Minute)
	for range 3 {
		workflow()
	}
	failing := workflow()
	finish(t, st, stepIDs(t, failing)["a"], contracts.StatusFailed)
	clk.Skip(time.Minute)
	require.Equal(t, map[contracts.WorkflowStatus]int64{contracts.WorkflowRunning: 3}, stats().Workflows,
		"the running ones are read again; the ended count is answered stale while it is counted again")
	testenv.Eventually(t, 10*time.Second, "the ended workflows counted in the background", func() bool {
		return stats().Workflows[contracts.WorkflowFailed] == 1
	})
	require.Equal(t, map[contracts.WorkflowStatus]int64{contracts.WorkflowRunning: 3, contracts.WorkflowFailed: 1}, stats().Workflows)
}

// readStats gets GET /v1/stats from mux and decodes it.
func readStats(t *testing.T, mux *http.ServeMux) contracts.Stats {
	t.Helper()
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/v1/stats", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var s contracts.Stats
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &s))
	return s
}
