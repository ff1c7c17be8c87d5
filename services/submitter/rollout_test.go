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
	"github.com/axsched/ax/services/internal/membership"
	"github.com/axsched/ax/services/internal/testenv"
)

// rolloutState is everything a rollout request may write.
func (f *fixture) rolloutState(t *testing.T) []string {
	t.Helper()
	return f.rowsOf(t,
		`SELECT CONCAT_WS('|', name, COALESCE(canary_version, '-'), canary_percent, canary_grace_ms) FROM task_types ORDER BY name`,
		`SELECT CONCAT_WS('|', task_type, canary_version, steps, percent, state, revision) FROM type_rollouts ORDER BY task_type`,
		`SELECT CONCAT_WS('|', id, action, to_percent) FROM rollout_log ORDER BY id`,
		`SELECT CONCAT_WS('|', event_id, subject) FROM outbox ORDER BY id`)
}

func decodeRollout(t *testing.T, body []byte) contracts.Rollout {
	t.Helper()
	var ro contracts.Rollout
	require.NoError(t, json.Unmarshal(body, &ro), string(body))
	return ro
}

func TestRolloutBadInputChangesNothing(t *testing.T) {
	f := newFixture(t)
	before := f.rolloutState(t)
	for _, tc := range []struct {
		name, path, body string
		status           int
		detail           string
	}{
		{"unknown type", "/v1/types/no.such/rollout", `{"version":"v2"}`, http.StatusNotFound, "no task type"},
		{"no version", "/v1/types/ax.noop/rollout", `{}`, http.StatusBadRequest, "version"},
		{"percent below 1", "/v1/types/ax.noop/rollout", `{"version":"v2","steps":[0,50]}`, http.StatusBadRequest, "within 1..100"},
		{"percent above 100", "/v1/types/ax.noop/rollout", `{"version":"v2","steps":[10,101]}`, http.StatusBadRequest, "within 1..100"},
		{"steps not increasing", "/v1/types/ax.noop/rollout", `{"version":"v2","steps":[10,50,30]}`, http.StatusBadRequest, "must increase"},
		{"repeated step", "/v1/types/ax.noop/rollout", `{"version":"v2","steps":[10,10]}`, http.StatusBadRequest, "must increase"},
		{"bad window", "/v1/types/ax.noop/rollout", `{"version":"v2","guard":{"window":"soon"}}`, http.StatusBadRequest, "guard.window"},
		{"negative threshold", "/v1/types/ax.noop/rollout", `{"version":"v2","guard":{"max_p99_worse":-1}}`, http.StatusBadRequest, "max_p99_worse"},
		{"unknown field", "/v1/types/ax.noop/rollout", `{"version":"v2","percent":50}`, http.StatusBadRequest, "percent"},
		{"malformed", "/v1/types/ax.noop/rollout", `{"version":`, http.StatusBadRequest, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := f.do(t, http.MethodPut, tc.path, strings.NewReader(tc.body))
			require.Equal(t, tc.status, rec.Code, rec.Body.String())
			require.Contains(t, problemOf(t, rec).Detail, tc.detail)
			require.Equal(t, before, f.rolloutState(t), "nothing changed")
		})
	}
	rec := f.do(t, http.MethodGet, "/v1/types/ax.noop/rollout", nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, contracts.RolloutNone, decodeRollout(t, rec.Body.Bytes()).State, "no rollout yet")
	rec = f.do(t, http.MethodGet, "/v1/types/no.such/rollout", nil)
	require.Equal(t, http.StatusNotFound, rec.Code, rec.Body.String())
}

func TestRolloutStartMoveAndConflict(t *testing.T) {
	f := newFixture(t)
	rdb, k := testenv.Redis(t)
	f.sub.ServeNodes(rdb, k, time.Second, 0)
	require.NoError(t, membership.Beat(context.Background(), rdb, k.Nodes(), contracts.Node{Name: "n1", Version: "v1",
		Types: []string{"ax.noop"}, LastHeartbeat: time.Now().UTC()}))

	// A version no executor reports is allowed, with a warning.
	rec := f.do(t, http.MethodPut, "/v1/types/ax.noop/rollout", strings.NewReader(`{"version":"v2","steps":[10,50,100],"step_time":"1m"}`))
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	ro := decodeRollout(t, rec.Body.Bytes())
	require.Equal(t, contracts.RolloutRunning, ro.State)
	require.Equal(t, 10, ro.Percent)
	require.Equal(t, "insufficient", ro.Verdict.Verdict)
	require.Len(t, ro.Warnings, 1)
	require.Contains(t, ro.Warnings[0], `version "v2"`)
	tt, err := f.st.GetType(context.Background(), "ax.noop")
	require.NoError(t, err)
	require.Equal(t, "v2", tt.Canary.Version, "routing sees the canary")
	require.Equal(t, 10, tt.Canary.Percent)

	// A second rollout while this one runs: 409, nothing changed.
	before := f.rolloutState(t)
	rec = f.do(t, http.MethodPut, "/v1/types/ax.noop/rollout", strings.NewReader(`{"version":"v3"}`))
	require.Equal(t, http.StatusConflict, rec.Code, rec.Body.String())
	require.Equal(t, contracts.CodeConflict, problemOf(t, rec).Code)
	require.Equal(t, before, f.rolloutState(t))

	move := func(action, body string, status int) contracts.Rollout {
		t.Helper()
		rec := f.do(t, http.MethodPost, "/v1/types/ax.noop/rollout/"+action, strings.NewReader(body))
		require.Equal(t, status, rec.Code, rec.Body.String())
		if status != http.StatusOK {
			problemOf(t, rec)
			return contracts.Rollout{}
		}
		return decodeRollout(t, rec.Body.Bytes())
	}
	require.Equal(t, contracts.RolloutPaused, move("pause", ``, http.StatusOK).State)
	move("pause", ``, http.StatusConflict)
	ro = move("promote", `{"reason":"looks good"}`, http.StatusOK)
	require.Equal(t, contracts.RolloutRunning, ro.State)
	require.Equal(t, 50, ro.Percent)
	ro = move("rollback", `{"reason":"errors in the logs"}`, http.StatusOK)
	require.Equal(t, contracts.RolloutRolledBack, ro.State)
	require.Equal(t, 0, ro.Percent)
	before = f.rolloutState(t)
	move("rollback", ``, http.StatusConflict)
	move("explode", ``, http.StatusNotFound)
	require.Equal(t, before, f.rolloutState(t))

	var actions []string
	for _, l := range ro.Log {
		actions = append(actions, l.Action)
		require.Equal(t, "submitter@test", l.Actor, "audited")
	}
	require.Equal(t, []string{"rollback", "advance", "pause", "start"}, actions)
	require.Contains(t, ro.Log[0].Reason, "errors in the logs")
	require.Equal(t, 4, len(testenv.Column[string](t, f.st.DB(),
		`SELECT subject FROM outbox WHERE subject = 'ax.events.rollout.changed'`)), "one event a move")

	// A finished rollout may be followed by a new one.
	rec = f.do(t, http.MethodPut, "/v1/types/ax.noop/rollout", strings.NewReader(`{"version":"v1"}`))
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	ro = decodeRollout(t, rec.Body.Bytes())
	require.Equal(t, 5, ro.Percent)
	require.Empty(t, ro.Warnings, "v1 is reported")
}
