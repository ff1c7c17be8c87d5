package main

import (
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
	"github.com/axsched/ax/services/app"
	"github.com/axsched/ax/services/demo"
	"github.com/axsched/ax/services/internal/otlpsink"
	"github.com/axsched/ax/services/internal/testenv"
)

// The first transfer of a workflow's steps and of a schedule's fired task
// is a span in the task's trace, as a submitted task's is: READY for a
// step without parents and for a fire, SUSPEND for a step that waits.
func TestCreationTransfersAreTraced(t *testing.T) {
	recv := &otlpsink.Sink{Keep: true}
	srv := httptest.NewServer(recv)
	t.Cleanup(srv.Close)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "100")
	a := startLiveAx(t, func(c *app.Config) { c.OTLPEndpoint = srv.URL })
	ctx := t.Context()

	wf, err := a.api.CreateWorkflow(ctx, contracts.WorkflowRequest{Name: "traced", Steps: []contracts.WorkflowStep{
		{Key: "first", StepTask: contracts.StepTask{Type: demo.TypeNoop}},
		{Key: "then", StepTask: contracts.StepTask{Type: demo.TypeNoop, Delay: "1h"}, DependsOn: []string{"first"}},
	}})
	require.NoError(t, err)
	require.Len(t, wf.Steps, 2)
	_, err = a.api.CreateSchedule(ctx, contracts.ScheduleRequest{Name: "traced", Cron: "@every 1s",
		Task: contracts.TaskTemplate{Type: demo.TypeNoop}})
	require.NoError(t, err)
	var fired string
	testenv.Eventually(t, 20*time.Second, "the schedule fired", func() bool {
		l, err := a.api.ListScheduleTasks(ctx, "traced", 1, "")
		if err != nil || len(l.Tasks) == 0 {
			return false
		}
		fired = l.Tasks[0].ID
		return true
	})

	firsts := map[string]string{wf.Steps[0].TaskID: "READY", wf.Steps[1].TaskID: "SUSPEND", fired: "READY"}
	for id, to := range firsts {
		task, err := a.api.Get(ctx, id)
		require.NoError(t, err)
		require.Len(t, task.TraceID, 32, "task %s has a trace", id)
		testenv.Eventually(t, 20*time.Second, "the first transfer of task "+id+" exported", func() bool {
			for _, s := range traceOf(recv, task.TraceID) {
				if s.name == "ax.transfer" && s.attrs["ax.task.id"] == id && s.attrs["ax.to"] == to && s.attrs["ax.from"] == "" {
					return true
				}
			}
			return false
		})
	}
}

// ax task submit --traceparent (or TRACEPARENT) puts the task in the
// caller's trace; a malformed context is refused and nothing is created.
func TestSubmitJoinsTheCallersTrace(t *testing.T) {
	a := startLiveAx(t)
	api := "http://" + a.addr
	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	out, err := runAx(t, "task", "submit", "--type", demo.TypeNoop, "--traceparent", caller, "--api", api, "-o", "json")
	require.NoError(t, err)
	var task contracts.Task
	require.NoError(t, json.Unmarshal([]byte(out), &task))
	require.Equal(t, caller[3:35], task.TraceID)

	t.Setenv("TRACEPARENT", caller)
	out, err = runAx(t, "task", "submit", "--type", demo.TypeNoop, "--api", api, "-o", "json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal([]byte(out), &task))
	require.Equal(t, caller[3:35], task.TraceID, "from TRACEPARENT")

	before, err := a.api.ListTasks(t.Context(), client.TaskFilter{Type: demo.TypeNoop}, 100, "")
	require.NoError(t, err)
	_, err = runAx(t, "task", "submit", "--type", demo.TypeNoop, "--traceparent", "not-a-trace", "--api", api)
	require.ErrorContains(t, err, "traceparent")
	after, err := a.api.ListTasks(t.Context(), client.TaskFilter{Type: demo.TypeNoop}, 100, "")
	require.NoError(t, err)
	require.Equal(t, len(before.Tasks), len(after.Tasks), "nothing created")
}
