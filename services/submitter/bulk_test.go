package submitter_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

func (f *fixture) bulk(t *testing.T, path, body string, status int) contracts.BulkResult {
	t.Helper()
	rec := f.do(t, http.MethodPost, path, strings.NewReader(body))
	require.Equal(t, status, rec.Code, rec.Body.String())
	var out contracts.BulkResult
	if status == http.StatusOK {
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	}
	return out
}

func (f *fixture) submitTask(t *testing.T, body string) string {
	t.Helper()
	rec := f.do(t, http.MethodPost, "/v1/tasks", strings.NewReader(body))
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	var task contracts.Task
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &task))
	return task.ID
}

func (f *fixture) statusOf(t *testing.T, id string) contracts.Status {
	t.Helper()
	rec := f.do(t, http.MethodGet, "/v1/tasks/"+id, nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var task contracts.Task
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &task))
	return task.Status
}

// TestBulkCancelDryRunThenConfirm: a dry run counts and changes nothing;
// the confirmed call cancels what was counted, records the actor and the
// note, and leaves alone a task submitted after the dry run and tasks the
// filter does not match.
func TestBulkCancelDryRunThenConfirm(t *testing.T) {
	f := newFixture(t)
	require.NoError(t, f.st.RegisterType(context.Background(), store.TaskType{Name: "bulk.other", TimeoutMs: 60000, MaxRetries: 3}))
	var victims []string
	for range 5 {
		victims = append(victims, f.submitTask(t, `{"type":"ax.noop"}`))
	}
	other := f.submitTask(t, `{"type":"bulk.other"}`)
	filter := `"filter":{"type":"ax.noop","status":"READY"}`

	before := f.rowCounts(t)
	dry := f.bulk(t, "/v1/tasks:cancel", `{`+filter+`,"dry_run":true}`, http.StatusOK)
	require.Equal(t, contracts.BulkResult{DryRun: true, Matched: 5, Confirm: dry.Confirm, Remaining: 5}, dry)
	require.NotEmpty(t, dry.Confirm)
	require.Equal(t, before, f.rowCounts(t), "a dry run changes nothing")

	late := f.submitTask(t, `{"type":"ax.noop"}`)
	f.bulk(t, "/v1/tasks:cancel", `{"filter":{"type":"ax.noop","status":"RETRYING"},"confirm":"`+dry.Confirm+`"}`, http.StatusBadRequest)
	got := f.bulk(t, "/v1/tasks:cancel", `{`+filter+`,"confirm":"`+dry.Confirm+`","note":"alice"}`, http.StatusOK)
	require.Equal(t, contracts.BulkResult{Matched: 5, Done: 5}, got)
	for _, id := range victims {
		require.Equal(t, contracts.StatusCancelled, f.statusOf(t, id))
	}
	require.Equal(t, contracts.StatusReady, f.statusOf(t, late), "submitted after the dry run")
	require.Equal(t, contracts.StatusReady, f.statusOf(t, other), "not matched")
	actors := testenv.Column[string](t, f.st.DB(), `SELECT actor FROM task_history WHERE task_id = ? AND to_status = 'CANCELLED'`, victims[0])
	require.Equal(t, []string{"submitter@test (note: alice)"}, actors)

	again := f.bulk(t, "/v1/tasks:cancel", `{`+filter+`,"confirm":"`+dry.Confirm+`"}`, http.StatusOK)
	require.Equal(t, contracts.BulkResult{}, again, "nothing left among what the dry run counted")
}

func TestBulkRefusesBadRequestsAndChangesNothing(t *testing.T) {
	f := newFixture(t)
	f.submitTask(t, `{"type":"ax.noop"}`)
	tests := []struct{ name, path, body, detail string }{
		{"neither dry run nor confirm", "/v1/tasks:cancel", `{"filter":{"status":"READY"}}`, "either dry_run"},
		{"both", "/v1/tasks:cancel", `{"filter":{"status":"READY"},"dry_run":true,"confirm":"x"}`, "either dry_run"},
		{"no status", "/v1/tasks:cancel", `{"filter":{"type":"ax.noop"},"dry_run":true}`, "one state that can be cancelled"},
		{"final status", "/v1/tasks:cancel", `{"filter":{"status":"SUCCESS"},"dry_run":true}`, "one state that can be cancelled"},
		{"bad filter", "/v1/tasks:cancel", `{"filter":{"status":"READY","node":"` + strings.Repeat("n", 300) + `"},"dry_run":true}`, "node"},
		{"unknown field", "/v1/tasks:cancel", `{"filter":{"state":"READY"},"dry_run":true}`, "unknown field"},
		{"garbage token", "/v1/tasks:cancel", `{"filter":{"status":"READY"},"confirm":"nope"}`, "dry-run the filter first"},
		{"letters by status", "/v1/deadletters:retry", `{"filter":{"status":"FAILED"},"dry_run":true}`, "type, created_after"},
		{"letters bad time", "/v1/deadletters:retry", `{"filter":{"created_after":"today"},"dry_run":true}`, "RFC 3339"},
	}
	before := f.rowCounts(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := f.do(t, http.MethodPost, tc.path, strings.NewReader(tc.body))
			require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
			require.Contains(t, problemOf(t, rec).Detail, tc.detail)
		})
	}
	require.Equal(t, before, f.rowCounts(t))
}

// TestBulkRetryReRunsOpenDeadLetters re-runs every open letter of a dry
// run and none filed after it.
func TestBulkRetryReRunsOpenDeadLetters(t *testing.T) {
	f := newFixture(t)
	var tasks []int64
	for range 3 {
		tasks = append(tasks, testenv.EndedTask(t, f.st, contracts.StatusFailed, time.Minute, true))
	}
	dry := f.bulk(t, "/v1/deadletters:retry", `{"filter":{"type":"ax.noop"},"dry_run":true}`, http.StatusOK)
	require.Equal(t, int64(3), dry.Matched)
	late := testenv.EndedTask(t, f.st, contracts.StatusFailed, time.Minute, true)
	got := f.bulk(t, "/v1/deadletters:retry", `{"filter":{"type":"ax.noop"},"confirm":"`+dry.Confirm+`"}`, http.StatusOK)
	require.Equal(t, contracts.BulkResult{Matched: 3, Done: 3}, got)
	for _, id := range tasks {
		task, err := f.st.GetTask(context.Background(), id)
		require.NoError(t, err)
		require.Equal(t, contracts.StatusRetrying, task.Status)
	}
	task, err := f.st.GetTask(context.Background(), late)
	require.NoError(t, err)
	require.Equal(t, contracts.StatusFailed, task.Status, "filed after the dry run")
}

// TestBulkCancelRefusesWhenMoreMatchThanCounted: a task that entered the
// state after the dry run makes the confirmed call a 409, changing nothing.
func TestBulkCancelRefusesWhenMoreMatchThanCounted(t *testing.T) {
	f := newFixture(t)
	first := f.submitTask(t, `{"type":"ax.noop"}`)
	second := f.submitTask(t, `{"type":"ax.noop"}`)
	_, err := f.st.DB().Exec(`UPDATE tasks SET status = 'SUSPEND' WHERE id = ?`, first)
	require.NoError(t, err)
	dry := f.bulk(t, "/v1/tasks:cancel", `{"filter":{"status":"READY"},"dry_run":true}`, http.StatusOK)
	require.Equal(t, int64(1), dry.Matched)
	_, err = f.st.DB().Exec(`UPDATE tasks SET status = 'READY' WHERE id = ?`, first)
	require.NoError(t, err)
	rec := f.do(t, http.MethodPost, "/v1/tasks:cancel", strings.NewReader(`{"filter":{"status":"READY"},"confirm":"`+dry.Confirm+`"}`))
	require.Equal(t, http.StatusConflict, rec.Code, rec.Body.String())
	require.Contains(t, problemOf(t, rec).Detail, "2 match now, 1 did at the dry run")
	require.Equal(t, contracts.StatusReady, f.statusOf(t, second))
}
