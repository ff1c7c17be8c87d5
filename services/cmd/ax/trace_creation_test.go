package main

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
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
