package natsperm_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/natsperm"
)

// TestPermissionsPerService: each service gets what only it does, the
// one-process user gets everything, and an unknown service is refused.
func TestPermissionsPerService(t *testing.T) {
	for _, tc := range []struct {
		service          string
		publishes        []string
		publishesNot     []string
		subscribes       []string
		subscribesNot    []string
		deniesDispatcher bool
	}{
		{service: "submitter", publishes: []string{events.EventsSubjects, events.ExecAll},
			publishesNot:  []string{events.SubjectDue, "$JS.API.CONSUMER.MSG.NEXT.AX_WORK.dispatcher"},
			subscribesNot: []string{events.ExecAll, events.EventsSubjects}},
		{service: "timer", publishes: []string{events.SubjectDue, "$JS.API.CONSUMER.MSG.NEXT.AX_EVENTS.timer"},
			publishesNot: []string{"$JS.API.CONSUMER.MSG.NEXT.AX_WORK.dispatcher"}},
		{service: "dispatcher", publishes: []string{"$JS.API.CONSUMER.MSG.NEXT.AX_WORK.dispatcher"},
			publishesNot: []string{events.SubjectDue}},
		{service: "executor", publishes: []string{events.SubjectDue, events.SubjectBenchDone},
			subscribes: []string{events.ExecAll, "ax.events.task.cancelled"}, deniesDispatcher: true},
		{service: "reaper", publishes: []string{events.SubjectDue}, publishesNot: []string{events.SubjectBenchDone},
			subscribesNot: []string{events.ExecAll}, deniesDispatcher: true},
		{service: "up", publishes: []string{events.SubjectDue, events.SubjectBenchDone,
			"$JS.API.CONSUMER.MSG.NEXT.AX_WORK.dispatcher", "$JS.API.CONSUMER.MSG.NEXT.AX_EVENTS.timer"},
			subscribes: []string{events.ExecAll, "_INBOX.ax-up.>"}, subscribesNot: []string{"_INBOX.ax-executor.>"}},
	} {
		p, err := natsperm.For(tc.service)
		require.NoError(t, err, tc.service)
		require.Contains(t, p.Subscribe, natsperm.InboxPrefix(natsperm.User(tc.service))+".>", tc.service)
		for _, s := range tc.publishes {
			require.Contains(t, p.Publish, s, tc.service)
		}
		for _, s := range tc.publishesNot {
			require.NotContains(t, p.Publish, s, tc.service)
		}
		for _, s := range tc.subscribes {
			require.Contains(t, p.Subscribe, s, tc.service)
		}
		for _, s := range tc.subscribesNot {
			require.NotContains(t, p.Subscribe, s, tc.service)
		}
		require.Equal(t, tc.deniesDispatcher, slices.Contains(p.PublishDeny, "$JS.API.CONSUMER.MSG.NEXT.AX_WORK.dispatcher"), tc.service)
	}
	_, err := natsperm.For("scheduler")
	require.ErrorContains(t, err, `unknown service "scheduler"`)

	var b strings.Builder
	require.NoError(t, natsperm.WriteConfig(&b, "AX"))
	for _, s := range natsperm.Services {
		require.Contains(t, b.String(), `user: "ax-`+s+`"`)
		require.Contains(t, b.String(), "password: $"+natsperm.PasswordVar(s))
	}
}
