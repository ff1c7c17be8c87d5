package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
)

func TestScheduleCommandsSendWhatWasGiven(t *testing.T) {
	var (
		mu   sync.Mutex
		sent []string
	)
	stored := contracts.Schedule{Name: "nightly", Cron: "30 2 * * *", TimeZone: "Europe/Berlin",
		Task: contracts.TaskTemplate{Type: "ax.noop", Payload: json.RawMessage(`{"k":1}`)}, Overlap: "skip", CatchUp: "last", CatchUpLimit: 100}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		sent = append(sent, r.Method+" "+r.URL.RequestURI()+" "+string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusNoContent)
		case r.URL.Path == "/v1/schedules" && r.Method == http.MethodGet:
			_ = json.NewEncoder(w).Encode(contracts.ScheduleList{Schedules: []contracts.Schedule{stored}})
		default:
			_ = json.NewEncoder(w).Encode(stored)
		}
	}))
	t.Cleanup(api.Close)
	tests := []struct {
		args []string
		sent []string
	}{
		{[]string{"create", "nightly", "--cron", "30 2 * * *", "--tz", "Europe/Berlin", "--type", "ax.noop", "--payload", `{"k":1}`, "--overlap", "skip", "--catch-up", "last"},
			[]string{`POST /v1/schedules {"name":"nightly","cron":"30 2 * * *","time_zone":"Europe/Berlin","task":{"type":"ax.noop","payload":{"k":1}},"overlap":"skip","catch_up":"last"}`}},
		{[]string{"update", "nightly", "--cron", "0 3 * * *"},
			[]string{`GET /v1/schedules/nightly `, `PUT /v1/schedules/nightly {"cron":"0 3 * * *","time_zone":"Europe/Berlin","task":{"type":"ax.noop","payload":{"k":1}},"overlap":"skip","catch_up":"last","catch_up_limit":100}`}},
		{[]string{"list", "--limit", "5"}, []string{`GET /v1/schedules?limit=5 `}},
		{[]string{"get", "nightly"}, []string{`GET /v1/schedules/nightly `}},
		{[]string{"pause", "nightly"}, []string{`POST /v1/schedules/nightly/pause `}},
		{[]string{"resume", "nightly"}, []string{`POST /v1/schedules/nightly/resume `}},
		{[]string{"delete", "nightly"}, []string{`DELETE /v1/schedules/nightly `}},
	}
	for _, tc := range tests {
		t.Run(tc.args[0], func(t *testing.T) {
			out, err := runAx(t, append(append([]string{"schedule"}, tc.args...), "--api", api.URL)...)
			require.NoError(t, err)
			mu.Lock()
			got := sent
			sent = nil
			mu.Unlock()
			require.Equal(t, tc.sent, got)
			require.Contains(t, out, "nightly")
		})
	}
	_, err := runAx(t, "schedule", "create", "x", "--cron", "* * * * *", "--type", "ax.noop", "--payload", "{", "--api", api.URL)
	require.ErrorContains(t, err, "--payload is not valid JSON")
}
