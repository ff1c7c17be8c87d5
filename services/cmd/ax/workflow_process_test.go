package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/testenv"
)

// A parent's executor killed with SIGKILL mid-run: the reaper hands the
// parent on, it succeeds elsewhere, and the child is released by that
// final transfer exactly once (one SUSPEND -> READY in its history) and
// runs once.
func TestKilledParentsChildIsReleasedExactlyOnce(t *testing.T) {
	c := newCluster(t)
	// Every service keeps the default membership heartbeat, so all of
	// them see the killed node go at the same time: with the executors'
	// heartbeat slowed down (as the lease-path test does), the relay and
	// the timer dropped live nodes between heartbeats while the reaper
	// still counted the killed one, and a parent handed back to the killed
	// node's subject waited there past the test's minute.
	fast := []string{"--lock-ttl", "2s", "--renew-interval", "500ms"}
	c.service(t, "submitter", "sub-1")
	c.service(t, "timer", "timer-1")
	c.service(t, "dispatcher", "disp-1")
	c.service(t, "reaper", "reaper-1", "--reap-interval", "500ms", "--reap-silence", "2s")
	victim := c.service(t, "executor", "exec-a", fast...)

	ctx := context.Background()
	wf, err := c.api.CreateWorkflow(ctx, contracts.WorkflowRequest{Name: "kill", BizKey: "kill-1", Steps: []contracts.WorkflowStep{
		{Key: "parent", StepTask: contracts.StepTask{Type: "ax.sleep", Timeout: "8s", Payload: []byte(`{"ms":4000}`)}},
		{Key: "child", StepTask: contracts.StepTask{Type: "ax.noop"}, DependsOn: []string{"parent"}},
	}})
	require.NoError(t, err)
	parent, child := wf.Steps[0].TaskID, wf.Steps[1].TaskID
	testenv.Eventually(t, 30*time.Second, "parent RUNNING on exec-a", func() bool {
		return c.count(t, "id = ? AND status = 'RUNNING' AND executor_addr = 'exec-a'", parent) == 1
	})
	// Killed once the lease is the task's own (see
	// TestKilledExecutorsTasksRunElsewhere).
	time.Sleep(500 * time.Millisecond)
	victim.kill9(t)
	require.Equal(t, 1, c.count(t, "id = ? AND status = 'SUSPEND'", child), "the child waits while its parent is lost")
	c.service(t, "executor", "exec-b", fast...)

	testenv.Eventually(t, 60*time.Second, "workflow SUCCEEDED", func() bool {
		got, err := c.api.GetWorkflow(ctx, wf.ID)
		require.NoError(t, err)
		return got.Status == contracts.WorkflowSucceeded
	})
	seq := func(id string) string {
		h, err := c.api.History(ctx, id)
		require.NoError(t, err)
		var s []string
		for _, e := range h.History {
			s = append(s, string(e.To))
		}
		return strings.Join(s, " ")
	}
	require.Equal(t, "READY RUNNING READY RUNNING SUCCESS", seq(parent), "the parent ran again on exec-b")
	require.Equal(t, "SUSPEND READY RUNNING SUCCESS", seq(child), "the child was released once and ran once")
}
