package submitter_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/testenv"
)

func TestScheduleRejectsBadInputAndCreatesNothing(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name, body string
		status     int
		code       string
		detail     string // the part of the detail that points at the field
	}{
		{"unparsable minute", `{"name":"a","cron":"61 * * * *","task":{"type":"ax.noop"}}`, 400, contracts.CodeInvalidArgument, "cron.minute: field 1 (minute) \"61\""},
		{"unparsable day of week", `{"name":"a","cron":"0 9 * * mon-funday","task":{"type":"ax.noop"}}`, 400, contracts.CodeInvalidArgument, "cron.day_of_week: field 5"},
		{"wrong field count", `{"name":"a","cron":"* * *","task":{"type":"ax.noop"}}`, 400, contracts.CodeInvalidArgument, "cron: \"* * *\" has 3 fields"},
		{"unknown time zone", `{"name":"a","cron":"0 3 * * *","time_zone":"Europe/Atlantis","task":{"type":"ax.noop"}}`, 400, contracts.CodeInvalidArgument, "time_zone: unknown time zone \"Europe/Atlantis\""},
		{"never fires", `{"name":"a","cron":"0 0 30 2 *","task":{"type":"ax.noop"}}`, 400, contracts.CodeInvalidArgument, "never fires"},
		{"interval below a second", `{"name":"a","cron":"@every 200ms","task":{"type":"ax.noop"}}`, 400, contracts.CodeInvalidArgument, "below the shortest interval of 1s"},
		{"unknown type", `{"name":"a","cron":"* * * * *","task":{"type":"no.such"}}`, 400, contracts.CodeUnknownType, "task: task type \"no.such\" is not registered"},
		{"bad template priority", `{"name":"a","cron":"* * * * *","task":{"type":"ax.noop","priority":"urgent"}}`, 400, contracts.CodeInvalidArgument, "task: unknown priority \"urgent\""},
		{"bad template timeout", `{"name":"a","cron":"* * * * *","task":{"type":"ax.noop","timeout":"999us"}}`, 400, contracts.CodeInvalidArgument, "task: "},
		{"template with a biz key", `{"name":"a","cron":"* * * * *","task":{"type":"ax.noop","biz_key":"k"}}`, 400, contracts.CodeInvalidArgument, "unknown field \"biz_key\""},
		{"template payload too large", `{"name":"a","cron":"* * * * *","task":{"type":"ax.noop","payload":"` + strings.Repeat("x", 2000) + `"}}`, 413, contracts.CodePayloadTooLarge, "task: payload"},
		{"bad name", `{"name":"Nightly Report","cron":"* * * * *","task":{"type":"ax.noop"}}`, 400, contracts.CodeInvalidArgument, "schedule name \"Nightly Report\" is invalid"},
		{"bad overlap", `{"name":"a","cron":"* * * * *","overlap":"queue","task":{"type":"ax.noop"}}`, 400, contracts.CodeInvalidArgument, "overlap: overlap \"queue\""},
		{"bad catch-up", `{"name":"a","cron":"* * * * *","catch_up":"some","task":{"type":"ax.noop"}}`, 400, contracts.CodeInvalidArgument, "catch_up: catch_up \"some\""},
		{"catch-up limit too high", `{"name":"a","cron":"* * * * *","catch_up":"all","catch_up_limit":5000,"task":{"type":"ax.noop"}}`, 400, contracts.CodeInvalidArgument, "catch_up_limit: catch_up_limit 5000"},
		{"malformed JSON", `{"name":"a",`, 400, contracts.CodeMalformedJSON, "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := f.do(t, http.MethodPost, "/v1/schedules", strings.NewReader(tt.body))
			require.Equal(t, tt.status, rec.Code, rec.Body.String())
			p := problemOf(t, rec)
			require.Equal(t, tt.code, p.Code)
			require.Contains(t, p.Detail, tt.detail)
			require.Equal(t, []int{0}, testenv.Column[int](t, f.st.DB(), `SELECT COUNT(*) FROM schedules`))
		})
	}
}

func decodeSchedule(t *testing.T, body []byte) contracts.Schedule {
	t.Helper()
	var sc contracts.Schedule
	require.NoError(t, json.Unmarshal(body, &sc))
	return sc
}

func TestScheduleLifecycle(t *testing.T) {
	f := newFixture(t)
	before := time.Now()
	rec := f.do(t, http.MethodPost, "/v1/schedules", strings.NewReader(
		`{"name":"nightly.report","cron":"30 2 * * *","time_zone":"Europe/Berlin","task":{"type":"ax.noop","payload":{"k":1}},"overlap":"skip","catch_up":"last"}`))
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	sc := decodeSchedule(t, rec.Body.Bytes())
	require.Equal(t, "Europe/Berlin", sc.TimeZone)
	require.Equal(t, "skip", sc.Overlap)
	require.Equal(t, "last", sc.CatchUp)
	require.Equal(t, 100, sc.CatchUpLimit)
	require.JSONEq(t, `{"k":1}`, string(sc.Task.Payload))
	berlin, _ := time.LoadLocation("Europe/Berlin")
	next := sc.NextFireTime.In(berlin)
	require.True(t, next.After(before))
	require.Equal(t, [2]int{2, 30}, [2]int{next.Hour(), next.Minute()})

	rec = f.do(t, http.MethodPost, "/v1/schedules", strings.NewReader(`{"name":"nightly.report","cron":"* * * * *","task":{"type":"ax.noop"}}`))
	require.Equal(t, http.StatusConflict, rec.Code)
	require.Equal(t, contracts.CodeConflict, problemOf(t, rec).Code)

	rec = f.do(t, http.MethodPut, "/v1/schedules/nightly.report", strings.NewReader(`{"cron":"*/10 * * * * *","task":{"type":"ax.noop"}}`))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	sc = decodeSchedule(t, rec.Body.Bytes())
	require.Equal(t, "*/10 * * * * *", sc.Cron)
	require.Equal(t, "UTC", sc.TimeZone)
	require.Equal(t, "allow", sc.Overlap)
	require.Zero(t, sc.NextFireTime.Second()%10)
	require.LessOrEqual(t, time.Until(sc.NextFireTime), 10*time.Second)

	rec = f.do(t, http.MethodPut, "/v1/schedules/nightly.report", strings.NewReader(`{"cron":"0 0 31 4 *","task":{"type":"ax.noop"}}`))
	require.Equal(t, http.StatusBadRequest, rec.Code)
	rec = f.do(t, http.MethodGet, "/v1/schedules/nightly.report", nil)
	require.Equal(t, "*/10 * * * * *", decodeSchedule(t, rec.Body.Bytes()).Cron, "a refused change changes nothing")

	rec = f.do(t, http.MethodPost, "/v1/schedules/nightly.report/pause", nil)
	require.Equal(t, http.StatusOK, rec.Code)
	require.True(t, decodeSchedule(t, rec.Body.Bytes()).Paused)
	rec = f.do(t, http.MethodPost, "/v1/schedules/nightly.report/resume", nil)
	require.Equal(t, http.StatusOK, rec.Code)
	resumed := decodeSchedule(t, rec.Body.Bytes())
	require.False(t, resumed.Paused)
	require.True(t, resumed.NextFireTime.After(time.Now().Add(-time.Second)))

	rec = f.do(t, http.MethodGet, "/v1/schedules?limit=1", nil)
	require.Equal(t, http.StatusOK, rec.Code)
	var list contracts.ScheduleList
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &list))
	require.Len(t, list.Schedules, 1)
	require.Equal(t, "nightly.report", list.Next)

	rec = f.do(t, http.MethodDelete, "/v1/schedules/nightly.report", nil)
	require.Equal(t, http.StatusNoContent, rec.Code)
	for _, path := range []string{"/v1/schedules/nightly.report", "/v1/schedules/nightly.report/pause"} {
		method := http.MethodGet
		if strings.HasSuffix(path, "pause") {
			method = http.MethodPost
		}
		rec = f.do(t, method, path, nil)
		require.Equal(t, http.StatusNotFound, rec.Code)
		require.Equal(t, contracts.CodeNotFound, problemOf(t, rec).Code)
	}
	rec = f.do(t, http.MethodPut, "/v1/schedules/missing", strings.NewReader(`{"cron":"* * * * *","task":{"type":"ax.noop"}}`))
	require.Equal(t, http.StatusNotFound, rec.Code)
}
