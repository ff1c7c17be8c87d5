package console_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
	"github.com/axsched/ax/services/app"
	"github.com/axsched/ax/services/demo"
	"github.com/axsched/ax/services/executor"
	"github.com/axsched/ax/services/internal/auth"
	"github.com/axsched/ax/services/internal/natsembed"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// axUnderTest is `ax up` in-process on real MySQL, Redis and an embedded
// NATS, with auth on: an operate and a read key exist before it starts.
type axUnderTest struct {
	base          string
	release       chan struct{} // lets the running console.report task finish
	operate, read string        // tokens
	submitOnly    string
	api           *client.Client // with the operate key
	st            *store.Store
}

func startAx(t *testing.T) *axUnderTest {
	t.Helper()
	ctx := context.Background()
	dsn := testenv.MySQLDSN(t)
	_, rk := testenv.Redis(t)
	st, err := store.Open(ctx, dsn, store.Options{Actor: "test"})
	require.NoError(t, err)
	t.Cleanup(func() { st.Close() })
	a := &axUnderTest{operate: key(t, st, "ops-alice", auth.RoleOperate), read: key(t, st, "viewer-bob", auth.RoleRead),
		submitOnly: key(t, st, "producer", auth.RoleSubmit), st: st, release: make(chan struct{})}

	listen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	ready := make(chan string, 1)
	cfg := app.Config{
		MySQLDSN: dsn, RedisAddr: "127.0.0.1:6379", RedisPrefix: rk.Prefix,
		EmbeddedNATS: true, Embedded: natsembed.Config{Listen: listen, StoreDir: filepath.Join(t.TempDir(), "nats")},
		HTTPAddr: "127.0.0.1:0", Node: "e2e", NodeID: 9,
		Types:   append(demo.Types(), executor.TypeSpec{Name: reportType, Handler: reportHandler(a.release)}),
		OnReady: func(addr string) { ready <- addr },
	}
	// Fresh counts on every page the test opens, and a revoked key
	// refused at once rather than after the cache period.
	cfg.Submitter.StatsTTL = time.Millisecond
	// The overview shows finished states too: read them afresh, as the
	// default minute-long cache would hide the tasks the test just ended.
	cfg.Submitter.FinishedStatsTTL = time.Millisecond
	cfg.AuthCache.CacheTTL = time.Millisecond
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- app.Run(runCtx, cfg, app.AllServices, testenv.Logger(t)) }()
	select {
	case addr := <-ready:
		a.base = "http://" + addr
	case err := <-done:
		cancel()
		t.Fatalf("ax did not start: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("ax did not start within 30s")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(60 * time.Second):
			t.Error("ax did not stop within 60s")
		}
	})
	a.api = client.New(a.base, client.WithToken(a.operate))
	return a
}

// reportType is a task type that reports progress, waits for the test,
// and returns a result.
const reportType = "console.report"

func reportHandler(release <-chan struct{}) executor.Handler {
	return executor.HandlerFunc(func(ctx context.Context, _ *executor.Task) error {
		if err := executor.SetProgress(ctx, 40, "copying rows"); err != nil {
			return err
		}
		select {
		case <-release:
		case <-ctx.Done():
			return ctx.Err()
		}
		return executor.SetResult(ctx, map[string]int{"rows": 42})
	})
}

// key creates an API key and returns its token.
func key(t *testing.T, st *store.Store, name string, role auth.Role) string {
	t.Helper()
	tok, _, err := auth.CreateKey(context.Background(), st, name, role, nil)
	require.NoError(t, err)
	return tok.Secret
}

// TestConsoleInBrowser drives the console in headless Chromium against a
// real ax: logins that must fail, a read key whose actions are refused,
// an operator going from a submitted task to its timeline, a cancel, a
// paused type and a re-run dead letter, and from a failed workflow to its
// steps and tasks. Every page is saved as a screenshot under bin/console.
func TestConsoleInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ax and a browser")
	}
	ax := startAx(t)
	b := startBrowser(t, ax.base)
	ctx := context.Background()

	const trace = "4bf92f3577b34da6a3ce929d0e0e4736"
	sleeping, err := ax.api.Submit(ctx, contracts.SubmitRequest{Type: demo.TypeSleep, Delay: "1h", BizKey: "order-1001",
		Payload: json.RawMessage(`{"ms":10}`), TraceParent: "00-" + trace + "-00f067aa0ba902b7-01"})
	require.NoError(t, err)

	t.Run("wrong keys are refused", func(t *testing.T) {
		p := b.tab(t)
		p.open("")
		p.waitText("main", "Sign in to ax")
		p.screenshot("login")
		p.login("ax_" + "notakeyofthisaxnotakeyofthisaxnotakeyofthisaxnotake")
		p.waitText("#login-error", "Wrong key")
		require.Empty(t, p.storedToken(), "a refused key is not kept")
		p.login(ax.submitOnly)
		p.waitText("#login-error", "needs read")
		require.Empty(t, p.storedToken())
	})

	t.Run("a read key sees the pages and its actions are refused", func(t *testing.T) {
		p := b.tab(t)
		p.open("#/types")
		p.login(ax.read)
		p.waitText("#who", "viewer-bob")
		p.waitText("#who", "read")
		p.waitText("main", demo.TypeSleep)
		p.click(`button[data-type="ax.sleep"]`)
		p.waitText("#flash", "403 forbidden")
		p.waitText("#flash", "needs operate")
		tt, err := ax.api.GetType(ctx, demo.TypeSleep)
		require.NoError(t, err)
		require.False(t, tt.Paused, "a refused action changes nothing")

		p.goTo("#/task/" + sleeping.ID)
		p.waitText("main", "Lifecycle")
		p.waitText("main", trace) // the trace its spans join, to look up in the tracing backend
		p.clickText("button", "Cancel task")
		p.clickText("button", "Really cancel?")
		p.waitText("#flash", "403 forbidden")
		p.screenshot("forbidden")
		task, err := ax.api.Get(ctx, sleeping.ID)
		require.NoError(t, err)
		require.Equal(t, contracts.StatusReady, task.Status)
	})

	t.Run("an operator follows a task, cancels it, pauses a type and re-runs a dead letter", func(t *testing.T) {
		operatorFlow(t, ax, b, sleeping.ID)
	})

	// After the operator's flow, which counts the dead letters: this one
	// files one more.
	t.Run("an operator finds a failed workflow and cancels a running one", func(t *testing.T) {
		workflowFlow(t, ax, b)
	})

	t.Run("a long task's progress and result show as it runs", func(t *testing.T) {
		task, err := ax.api.Submit(ctx, contracts.SubmitRequest{Type: reportType})
		require.NoError(t, err)
		p := b.tab(t)
		p.open("#/task/" + task.ID)
		p.login(ax.operate)
		p.waitText("main", "40 % — copying rows")
		p.screenshot("progress")
		close(ax.release)
		p.waitText("h1", "SUCCESS") // the page follows the task
		p.waitText("main", `"rows": 42`)
	})

	t.Run("a key revoked while in use leads back to the login", func(t *testing.T) {
		p := b.tab(t)
		p.open("#/types")
		token := key(t, ax.st, "leaver", auth.RoleRead)
		p.login(token)
		p.waitText("#who", "leaver")
		_, err := ax.st.RevokeAPIKey(ctx, "leaver")
		require.NoError(t, err)
		p.goTo("#/nodes")
		p.waitText("#login-error", "was revoked")
		require.Empty(t, p.storedToken())
	})

	t.Run("open on loopback the console needs no login and says so", func(t *testing.T) {
		p := b.tab(t)
		p.base = startOpenSubmitter(t)
		p.open("#/types")
		p.waitText("#who", "no login")
		p.waitText("#notice", "checks no API keys")
		p.waitText("main", "ax.noop")
	})
}

func operatorFlow(t *testing.T, ax *axUnderTest, b *browser, sleepingID string) {
	ctx := context.Background()
	done, err := ax.api.Submit(ctx, contracts.SubmitRequest{Type: demo.TypeNoop})
	require.NoError(t, err)
	failing, err := ax.api.Submit(ctx, contracts.SubmitRequest{Type: demo.TypeFlaky, Payload: json.RawMessage(`{"fail_times":99,"permanent":true}`)})
	require.NoError(t, err)
	testenv.Eventually(t, 20*time.Second, "the failing task is a dead letter", func() bool {
		l, err := ax.api.ListDeadLetters(ctx, client.DeadLetterFilter{})
		return err == nil && len(l.DeadLetters) == 1
	})

	p := b.tab(t)
	p.open("")
	p.login(ax.operate)
	p.waitText("#who", "ops-alice")
	p.waitText("main", "Recent dead letters")
	p.waitText("main", failing.ID)
	p.waitText("#by-type", demo.TypeFlaky)
	p.screenshot("overview")

	p.goTo("#/tasks")
	p.waitText("main", sleepingID)
	p.waitText("main", done.ID)
	p.screenshot("tasks")
	p.run("filter the tasks",
		chromedp.SetValue(chromedp.CSS("#f-type"), demo.TypeSleep),
		chromedp.SetValue(chromedp.CSS("#f-status"), string(contracts.StatusReady)),
		typeInto("#f-biz_key", "order-1001"),
		chromedp.Click(chromedp.CSS("form.filters button[type=submit]")))
	p.waitGone("main", done.ID) // the filter leaves other types out
	p.waitText("main", sleepingID)
	hash, err := eval[string](p, "read the route", "location.hash")
	require.NoError(t, err)
	require.Equal(t, "#/tasks?type=ax.sleep&status=READY&biz_key=order-1001", hash, "a filtered list is a link")

	p.click(`a[href="#/task/` + sleepingID + `"]`)
	p.waitText("main", "Lifecycle")
	p.waitText("ol.timeline", "submitted, due")
	p.waitText("ol.timeline", "key ops-alice via submitter")
	p.waitText("ol.timeline", "on node e2e")
	p.waitText("main", "order-1001")
	p.clickText("button", "Cancel task")
	p.clickText("button", "Really cancel?")
	p.waitText("#flash", "cancelled")
	p.waitText("ol.timeline", "cancelled through the API")
	p.screenshot("task")
	task, err := ax.api.Get(ctx, sleepingID)
	require.NoError(t, err)
	require.Equal(t, contracts.StatusCancelled, task.Status)

	bulkCancel(t, ax, p)

	p.goTo("#/types")
	p.click(`button[data-type="ax.sleep"]`)
	p.waitText("#flash", "ax.sleep paused")
	p.waitText(`button[data-type="ax.sleep"]`, "Resume")
	tt, err := ax.api.GetType(ctx, demo.TypeSleep)
	require.NoError(t, err)
	require.True(t, tt.Paused)
	p.screenshot("types")
	p.click(`button[data-type="ax.sleep"]`)
	p.waitText("#flash", "ax.sleep resumed")
	p.click(`details[data-type="ax.noop"] summary`)
	p.run("set a limit",
		chromedp.SetValue(chromedp.CSS(`details[data-type="ax.noop"] input[name=concurrency]`), "4"),
		chromedp.Click(chromedp.CSS(`details[data-type="ax.noop"] button[type=submit]`)))
	p.waitText("#flash", "ax.noop limits saved")
	tt, err = ax.api.GetType(ctx, demo.TypeNoop)
	require.NoError(t, err)
	require.Equal(t, 4, tt.Concurrency)

	p.goTo("#/task/" + failing.ID)
	p.waitText(".dead-letter", "Filed as dead letter")
	p.goTo("#/deadletters")
	p.waitText("main", failing.ID)
	p.screenshot("deadletters")
	p.clickText("button", "Re-run")
	p.clickText("button", "Really re-run?")
	p.waitText("#flash", "re-run from dead letter")
	l, err := ax.api.ListDeadLetters(ctx, client.DeadLetterFilter{All: true})
	require.NoError(t, err)
	require.NotEmpty(t, l.DeadLetters)
	retried := l.DeadLetters[len(l.DeadLetters)-1]
	require.Equal(t, failing.ID, retried.TaskID)
	require.Contains(t, retried.RetriedBy, "key:ops-alice", "the re-run is recorded under the key")

	p.goTo("#/nodes")
	p.waitText("main", "e2e")
	p.waitText("main", "alive")
	p.waitText("main", "Shards owned")
	p.screenshot("nodes")
}

// workflowFlow finds a failed workflow through the filtered list, reads its
// steps, goes to a step's task and back, then cancels a running workflow
// from its page.
func workflowFlow(t *testing.T, ax *axUnderTest, b *browser) {
	ctx := context.Background()
	fine, err := ax.api.CreateWorkflow(ctx, contracts.WorkflowRequest{Name: "order", BizKey: "order-41", Steps: []contracts.WorkflowStep{
		{Key: "charge", StepTask: contracts.StepTask{Type: demo.TypeNoop}},
	}})
	require.NoError(t, err)
	failed, err := ax.api.CreateWorkflow(ctx, contracts.WorkflowRequest{Name: "order", BizKey: "order-42", Steps: []contracts.WorkflowStep{
		{Key: "charge", StepTask: contracts.StepTask{Type: demo.TypeFlaky, Payload: json.RawMessage(`{"fail_times":5,"permanent":true}`)}},
		{Key: "sms", StepTask: contracts.StepTask{Type: demo.TypeNoop}, DependsOn: []string{"charge"}},
	}})
	require.NoError(t, err)
	charge, sms := stepTask(t, failed, "charge"), stepTask(t, failed, "sms")
	waitWorkflow(t, ax, fine.ID, contracts.WorkflowSucceeded)
	waitWorkflow(t, ax, failed.ID, contracts.WorkflowFailed)

	p := b.tab(t)
	p.open("#/workflows")
	p.login(ax.operate)
	p.waitText(listRow(failed.ID), "order-42")
	p.waitText(listRow(failed.ID), "FAILED")
	p.waitText(listRow(failed.ID), `step "charge"`)
	p.waitText(listRow(fine.ID), "order-41")
	p.waitText(listRow(fine.ID), "SUCCEEDED")
	p.screenshot("workflows")
	p.run("filter the workflows",
		chromedp.SetValue(chromedp.CSS("#f-status"), string(contracts.WorkflowFailed)),
		typeInto("#f-name", "order"),
		chromedp.Click(chromedp.CSS("form.filters button[type=submit]")))
	p.waitGone("main", fine.ID) // the filter leaves the succeeded one out
	p.waitText(listRow(failed.ID), "order-42")
	hash, err := eval[string](p, "read the route", "location.hash")
	require.NoError(t, err)
	require.Equal(t, "#/workflows?status=FAILED&name=order", hash, "a filtered list is a link")

	// The overview counts workflows per state, each count a link to its list.
	p.goTo("#/")
	p.waitText("#workflows", "Workflows by state")
	p.waitText("#workflows", "FAILED")
	p.click(`#workflows a[href="#/workflows?status=FAILED"]`)
	p.waitText(listRow(failed.ID), "order-42")

	p.goTo("#/workflows?status=DONE")
	p.waitText("#flash", "400 invalid_argument")
	p.waitText("#flash", "DONE")
	require.True(t, p.has("form.filters #f-status"), "a refused filter keeps the form")
	p.goTo("#/workflows?status=FAILED")
	p.click(`a[href="#/workflow/` + failed.ID + `"]`)
	p.waitText("h1", failed.ID)
	p.waitText("h1", "FAILED")
	p.waitText("dl.details", "order-42")
	p.waitText("dl.details", `step "charge"`)
	p.waitText(stepRow(charge), "FAILED")
	p.waitText(stepRow(sms), "CANCELLED")
	p.waitText(stepRow(sms), "charge") // what it depends on
	p.waitText(stepRow(sms), "success")
	// Why, from the lineage: sms was cancelled because charge failed, and
	// charge's one attempt left its error.
	p.waitText(stepRow(sms), "ended FAILED; this task runs only when it succeeds")
	p.waitText(stepRow(charge), "1 attempt, last on executor@")
	p.waitText(stepRow(charge), "ax.flaky: attempt 1 of the first 5 fails")
	require.False(t, p.has("main button"), "an ended workflow has no Cancel")
	p.screenshot("workflow")

	p.click(stepRow(charge) + ` a[href="#/task/` + charge + `"]`)
	p.waitText("h1", charge)
	p.waitText("dl.details", "Workflow")
	p.click(`dl.details a[href="#/workflow/` + failed.ID + `"]`)
	p.waitText("h1", failed.ID)

	slow, err := ax.api.CreateWorkflow(ctx, contracts.WorkflowRequest{Name: "export", Steps: []contracts.WorkflowStep{
		// Due in 3 s: the page first shows it waiting, and only its refresh
		// can show it start.
		{Key: "dump", StepTask: contracts.StepTask{Type: demo.TypeSleep, Payload: json.RawMessage(`{"ms":60000}`), Delay: "3s"}},
		{Key: "upload", StepTask: contracts.StepTask{Type: demo.TypeNoop}, DependsOn: []string{"dump"}},
	}})
	require.NoError(t, err)
	dump := stepTask(t, slow, "dump")
	p.goTo("#/workflow/" + slow.ID)
	p.waitText("h1", "RUNNING")
	p.waitText(stepRow(dump), "READY")
	p.waitText(stepRow(dump), "RUNNING") // the page follows the step as it starts
	p.clickText("button", "Cancel workflow")
	p.clickText("button", "Really cancel?")
	p.waitText("#flash", "Workflow "+slow.ID+" cancelled")
	p.waitText("h1", "CANCELLED")
	p.waitText(stepRow(dump), "CANCELLED")
	require.False(t, p.has("main button"), "a cancelled workflow has no Cancel")
	w, err := ax.api.GetWorkflow(ctx, slow.ID)
	require.NoError(t, err)
	require.Equal(t, contracts.WorkflowCancelled, w.Status)
	for _, s := range w.Steps {
		require.Equal(t, contracts.StatusCancelled, s.Status, "step %s", s.Key)
	}
	h, err := ax.api.History(ctx, dump)
	require.NoError(t, err)
	require.Contains(t, h.History[len(h.History)-1].Actor, "key:ops-alice", "the cancel is recorded under the key")
}

// listRow and stepRow select the row of a workflow in the list and of a
// step's task on a workflow's page.
func listRow(id string) string { return `tbody tr:has(a[href="#/workflow/` + id + `"])` }
func stepRow(taskID string) string {
	return `tbody tr:has(> td > a[href="#/task/` + taskID + `"])`
}

// stepTask is the task ID of a workflow's step.
func stepTask(t *testing.T, w *contracts.Workflow, key string) string {
	t.Helper()
	for _, s := range w.Steps {
		if s.Key == key {
			return s.TaskID
		}
	}
	t.Fatalf("workflow %s has no step %q", w.ID, key)
	return ""
}

// waitWorkflow waits until the API says the workflow is in state want.
func waitWorkflow(t *testing.T, ax *axUnderTest, id string, want contracts.WorkflowStatus) {
	t.Helper()
	testenv.Eventually(t, 20*time.Second, "workflow "+id+" is "+string(want), func() bool {
		w, err := ax.api.GetWorkflow(context.Background(), id)
		return err == nil && w.Status == want
	})
}

// bulkCancel cancels every READY ax.sleep task from the filtered list: a
// dry run shows the count, and only the confirm acts.
func bulkCancel(t *testing.T, ax *axUnderTest, p *page) {
	ctx := context.Background()
	var ids []string
	for range 3 {
		task, err := ax.api.Submit(ctx, contracts.SubmitRequest{Type: demo.TypeSleep, Delay: "1h"})
		require.NoError(t, err)
		ids = append(ids, task.ID)
	}
	p.goTo("#/tasks?type=ax.sleep&status=READY")
	for _, id := range ids {
		p.waitText("main", id)
	}
	p.clickText("button", "Cancel all matching…")
	p.waitText(".bulk", "3 tasks match this filter")
	p.screenshot("bulk")
	for _, id := range ids {
		task, err := ax.api.Get(ctx, id)
		require.NoError(t, err)
		require.Equal(t, contracts.StatusReady, task.Status, "a dry run changes nothing")
	}
	p.clickText("button", "Cancel 3 tasks")
	p.waitText("#flash", "Cancelled 3 tasks")
	p.waitText("main", "No task matches")
	for _, id := range ids {
		h, err := ax.api.History(ctx, id)
		require.NoError(t, err)
		last := h.History[len(h.History)-1]
		require.Equal(t, contracts.StatusCancelled, last.To)
		require.Contains(t, last.Actor, "key:ops-alice", "each bulk cancel is recorded under the key")
	}
}
