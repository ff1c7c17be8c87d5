package submitter_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
)

func TestListTasksRefusesBadFilters(t *testing.T) {
	f := newFixture(t)
	tests := []struct{ name, query, detail string }{
		{"unknown parameter", "staus=READY", "unknown query parameter"},
		{"bad type", "type=Bad%20Type", "type"},
		{"bad status", "status=DONE", "want one of"},
		{"biz_key without type", "biz_key=k", "needs type"},
		{"node without status", "node=n1", "needs status"},
		{"bad created_after", "created_after=yesterday", "RFC 3339"},
		{"created range empty", "created_after=2026-01-02T00:00:00Z&created_before=2026-01-01T00:00:00Z", "before created_before"},
		{"limit zero", "limit=0", "limit"},
		{"limit too big", "limit=1001", "limit"},
		{"garbage cursor", "cursor=abc", "not a cursor"},
		{"schedule with status", "schedule=nightly&status=READY", "schedule combines only with limit and cursor, not status"},
		{"schedule with type", "schedule=nightly&type=ax.noop", "not type"},
		{"bad schedule name", "schedule=Bad%20Name", "schedule"},
		{"empty schedule", "schedule=", "schedule"},
		{"schedule limit", "schedule=nightly&limit=0", "limit"},
		{"schedule garbage cursor", "schedule=nightly&cursor=abc", "not a cursor"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := f.do(t, http.MethodGet, "/v1/tasks?"+tc.query, nil)
			require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
			p := problemOf(t, rec)
			require.Equal(t, contracts.CodeInvalidArgument, p.Code)
			require.Contains(t, p.Detail, tc.detail)
		})
	}
}

// TestListTasksPagesThroughTheAPI submits tasks and reads them back two at
// a time through next_cursor, newest first, and refuses a cursor under
// other filters.
func TestListTasksPagesThroughTheAPI(t *testing.T) {
	f := newFixture(t)
	var ids []string
	for i := range 5 {
		rec := f.do(t, http.MethodPost, "/v1/tasks", strings.NewReader(`{"type":"ax.noop","payload":{"n":`+string(rune('0'+i))+`}}`))
		require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
		var task contracts.Task
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &task))
		ids = append([]string{task.ID}, ids...)
	}
	var got []string
	q := url.Values{"type": {"ax.noop"}, "limit": {"2"}}
	var cursor string
	for range 10 {
		rec := f.do(t, http.MethodGet, "/v1/tasks?"+q.Encode(), nil)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var page contracts.TaskList
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &page))
		for _, task := range page.Tasks {
			require.Empty(t, task.Payload)
			got = append(got, task.ID)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
		q.Set("cursor", cursor)
	}
	require.Equal(t, ids, got)

	rec := f.do(t, http.MethodGet, "/v1/tasks?status=READY&cursor="+cursor, nil)
	require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
	require.Contains(t, problemOf(t, rec).Detail, "other filters")
	rec = f.do(t, http.MethodGet, "/v1/tasks?schedule=nightly&cursor="+cursor, nil)
	require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
	require.Contains(t, problemOf(t, rec).Detail, "other filters")
}
