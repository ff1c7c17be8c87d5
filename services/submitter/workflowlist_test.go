package submitter_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
)

// listWorkflows gets GET /v1/workflows?query and decodes the page.
func (f *fixture) listWorkflows(t *testing.T, query string) contracts.WorkflowList {
	t.Helper()
	rec := f.do(t, http.MethodGet, "/v1/workflows?"+query, nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var l contracts.WorkflowList
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &l))
	return l
}

func workflowIDs(l contracts.WorkflowList) []string {
	out := make([]string, len(l.Workflows))
	for i, w := range l.Workflows {
		out[i] = w.ID
	}
	return out
}

// TestListWorkflowsFindsAFailedOneAndPages submits five workflows, fails
// one, and finds it by state, name and business key; the whole list pages
// two at a time, newest first; a step's task names its workflow.
func TestListWorkflowsFindsAFailedOneAndPages(t *testing.T) {
	f := newFixture(t)
	var ids []string // oldest first
	var failed contracts.Workflow
	for i := range 5 {
		name := "order"
		if i%2 == 1 {
			name = "refund"
		}
		wf := f.submitWorkflow(t, `{"name":"`+name+`","biz_key":"k-`+strconv.Itoa(i)+`","steps":[
			{"key":"charge","type":"ax.noop"},{"key":"sms","type":"ax.noop","depends_on":["charge"]}]}`)
		ids = append(ids, wf.ID)
		if i == 2 {
			failed = wf
		}
	}
	steps := stepIDs(t, failed)
	finish(t, f.st, steps["charge"], contracts.StatusFailed)

	l := f.listWorkflows(t, "status=FAILED")
	require.Equal(t, []string{failed.ID}, workflowIDs(l))
	got := l.Workflows[0]
	require.Equal(t, "order", got.Name)
	require.Equal(t, "k-2", got.BizKey)
	require.Equal(t, 0, got.OpenSteps, "charge failed, sms was cancelled")
	require.Contains(t, got.Reason, "charge")
	require.Empty(t, l.NextCursor, "a page that is not full is the last")

	require.Equal(t, []string{ids[3], ids[1]}, workflowIDs(f.listWorkflows(t, "name=refund")))
	require.Equal(t, []string{ids[4]}, workflowIDs(f.listWorkflows(t, "biz_key=k-4")))
	require.Empty(t, workflowIDs(f.listWorkflows(t, "biz_key=k-4&name=refund")), "k-4 is an order's key")
	require.Equal(t, []string{ids[4], ids[0]}, workflowIDs(f.listWorkflows(t, "name=order&status=RUNNING")))
	var all []string
	cursor := ""
	for range 5 {
		q := url.Values{"limit": {"2"}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		page := f.listWorkflows(t, q.Encode())
		all = append(all, workflowIDs(page)...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	require.Equal(t, []string{ids[4], ids[3], ids[2], ids[1], ids[0]}, all)

	future := url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	require.Empty(t, f.listWorkflows(t, "created_after="+future).Workflows)
	require.Len(t, f.listWorkflows(t, "created_before="+future).Workflows, 5)

	rec := f.do(t, http.MethodGet, "/v1/tasks/"+strconv.FormatInt(steps["sms"], 10), nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var task contracts.Task
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &task))
	require.Equal(t, failed.ID, task.WorkflowID)
	plain := f.submitTask(t, `{"type":"ax.noop"}`)
	rec = f.do(t, http.MethodGet, "/v1/tasks/"+plain, nil)
	require.NotContains(t, rec.Body.String(), "workflow_id", "a task outside a workflow names none")
}

// TestListWorkflowsRefusesBadFilters: each bad query answers 400 naming
// what is wrong.
func TestListWorkflowsRefusesBadFilters(t *testing.T) {
	f := newFixture(t)
	for query, want := range map[string]string{
		"stauts=FAILED":                    `unknown query parameter "stauts"`,
		"status=DONE":                      "want one of RUNNING, SUCCEEDED, FAILED",
		"status=READY":                     "want one of RUNNING",
		"limit=0":                          "limit",
		"limit=1001":                       "limit",
		"biz_key=":                         "biz_key is 0 bytes",
		"name=" + strings.Repeat("n", 129): "name is 129 bytes",
		"created_after=yesterday":          "not an RFC 3339 time",
		"created_after=2026-01-02T00:00:00Z&created_before=2026-01-01T00:00:00Z": "created_after must be before created_before",
		"cursor=bm9wZQ":                  "not a cursor of a workflow list",
		"cursor=" + taskListCursor(t, f): "not a cursor of a workflow list",
	} {
		rec := f.do(t, http.MethodGet, "/v1/workflows?"+query, nil)
		require.Equal(t, http.StatusBadRequest, rec.Code, "%s: %s", query, rec.Body.String())
		var p contracts.Problem
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
		require.Contains(t, p.Detail, want, query)
	}
}

// taskListCursor returns the cursor of a full page of a task list.
func taskListCursor(t *testing.T, f *fixture) string {
	t.Helper()
	f.submitTask(t, `{"type":"ax.noop"}`)
	f.submitTask(t, `{"type":"ax.noop"}`)
	rec := f.do(t, http.MethodGet, "/v1/tasks?limit=1", nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var l contracts.TaskList
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &l))
	require.NotEmpty(t, l.NextCursor)
	return l.NextCursor
}
