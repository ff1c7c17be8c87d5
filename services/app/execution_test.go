package app_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
	"github.com/axsched/ax/services/app"
	"github.com/axsched/ax/services/executor"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/testenv"
)

func ptr[T any](v T) *T { return &v }

func waitStatus(t *testing.T, api *client.Client, id string, want contracts.Status, timeout time.Duration) *contracts.Task {
	t.Helper()
	var task *contracts.Task
	testenv.Eventually(t, timeout, "task "+id+" "+string(want), func() bool {
		var err error
		task, err = api.Get(context.Background(), id)
		return err == nil && task.Status == want
	})
	return task
}

func sequence(t *testing.T, api *client.Client, id string) (string, []contracts.HistoryEntry) {
	t.Helper()
	h, err := api.History(context.Background(), id)
	require.NoError(t, err)
	var seq []string
	for _, e := range h.History {
		seq = append(seq, string(e.To))
	}
	return strings.Join(seq, " "), h.History
}

func TestFlakyTaskRetriesWithBackoffThenSucceeds(t *testing.T) {
	_, k := testenv.Redis(t)
	sys := startSystem(t, "127.0.0.1:6379", k.Prefix, nil)
	ctx := context.Background()
	_, err := sys.api.UpdateType(ctx, "ax.flaky", contracts.TaskTypeUpdate{BackoffBase: ptr("100ms"), BackoffCap: ptr("1s")})
	require.NoError(t, err)
	sys.expireTypeCaches()

	task, err := sys.api.Submit(ctx, contracts.SubmitRequest{Type: "ax.flaky", Payload: json.RawMessage(`{"fail_times":2}`)})
	require.NoError(t, err)
	done := waitStatus(t, sys.api, task.ID, contracts.StatusSuccess, 30*time.Second)
	require.Equal(t, 3, done.Attempt)
	require.Equal(t, 2, done.RetryCount)

	seq, h := sequence(t, sys.api, task.ID)
	require.Equal(t, "READY RUNNING FAILED RETRYING READY RUNNING FAILED RETRYING READY RUNNING SUCCESS", seq)
	// Each retry waits its backoff, 100 ms then 200 ms plus up to half as
	// much jitter, counted from when the attempt failed (its FAILED row is
	// stamped when the outcome writer records it, a few milliseconds
	// later), and its task becomes READY no earlier than that.
	dues := testenv.Column[int64](t, sys.db,
		`SELECT next_run_time FROM task_history WHERE task_id = ? AND to_status = 'RETRYING' ORDER BY id`, task.ID)
	require.Len(t, dues, 2)
	for k, i := range []int{3, 7} {
		base := 100 * time.Millisecond << k
		delay, err := time.ParseDuration(h[i].Reason[strings.LastIndex(h[i].Reason, " ")+1:])
		require.NoError(t, err, "reason %q", h[i].Reason)
		require.GreaterOrEqual(t, delay, base, "retry %d: %s", k+1, h[i].Reason)
		require.LessOrEqual(t, delay, base*3/2, "retry %d: %s", k+1, h[i].Reason)
		require.GreaterOrEqual(t, h[i+1].At.UnixMilli(), dues[k], "retry %d READY before its due time", k+1)
		require.GreaterOrEqual(t, h[i+1].At.Sub(h[i-1].At), delay-50*time.Millisecond,
			"retry %d: READY %s after the FAILED row, backoff %s", k+1, h[i+1].At.Sub(h[i-1].At), delay)
	}
}

func TestFailuresEndInDeadLettersAndCanBeRerun(t *testing.T) {
	_, k := testenv.Redis(t)
	sys := startSystem(t, "127.0.0.1:6379", k.Prefix, nil)
	ctx := context.Background()
	_, err := sys.api.UpdateType(ctx, "ax.flaky", contracts.TaskTypeUpdate{BackoffBase: ptr("50ms")})
	require.NoError(t, err)
	sys.expireTypeCaches()

	// Out of retries: 1 retry, 3 failures planned.
	exhausted, err := sys.api.Submit(ctx, contracts.SubmitRequest{Type: "ax.flaky", MaxRetries: ptr(1),
		Payload: json.RawMessage(`{"fail_times":3}`)})
	require.NoError(t, err)
	// Not retryable: fails for good on the first attempt.
	permanent, err := sys.api.Submit(ctx, contracts.SubmitRequest{Type: "ax.flaky", MaxRetries: ptr(5),
		Payload: json.RawMessage(`{"fail_times":1,"permanent":true}`)})
	require.NoError(t, err)
	waitStatus(t, sys.api, exhausted.ID, contracts.StatusFailed, 30*time.Second)
	waitStatus(t, sys.api, permanent.ID, contracts.StatusFailed, 30*time.Second)
	time.Sleep(300 * time.Millisecond) // nothing more may happen to them

	seq, _ := sequence(t, sys.api, exhausted.ID)
	require.Equal(t, "READY RUNNING FAILED RETRYING READY RUNNING FAILED", seq)
	seq, h := sequence(t, sys.api, permanent.ID)
	require.Equal(t, "READY RUNNING FAILED", seq)
	require.Contains(t, h[2].Reason, "not retryable")

	list, err := sys.api.ListDeadLetters(ctx, client.DeadLetterFilter{})
	require.NoError(t, err)
	byTask := map[string]contracts.DeadLetter{}
	for _, d := range list.DeadLetters {
		byTask[d.TaskID] = d
	}
	require.Len(t, byTask, 2)
	require.Contains(t, byTask[exhausted.ID].LastError, "attempt 2")
	require.Equal(t, 2, byTask[exhausted.ID].Attempt)

	// An audited re-run: a fresh round of retries; attempt 3 fails, 4 succeeds.
	d, err := sys.api.RetryDeadLetter(ctx, byTask[exhausted.ID].ID, "alice")
	require.NoError(t, err)
	require.Equal(t, "submitter@e2e (note: alice)", d.RetriedBy, "auth is off on loopback with no key: the submitter is the actor, the caller a note")
	waitStatus(t, sys.api, exhausted.ID, contracts.StatusSuccess, 30*time.Second)
	seq, h = sequence(t, sys.api, exhausted.ID)
	require.Equal(t, "READY RUNNING FAILED RETRYING READY RUNNING FAILED RETRYING READY RUNNING FAILED RETRYING READY RUNNING SUCCESS", seq)
	rerun := h[7]
	require.Equal(t, contracts.StatusRetrying, rerun.To)
	require.Equal(t, "submitter@e2e (note: alice)", rerun.Actor)
	require.Contains(t, rerun.Reason, "dead letter "+d.ID)
	require.Contains(t, rerun.Reason, "attempt 2")

	_, err = sys.api.RetryDeadLetter(ctx, d.ID, "bob")
	var p *contracts.Problem
	require.ErrorAs(t, err, &p)
	require.Equal(t, 409, p.Status, "a dead letter is re-run once")
	open, err := sys.api.ListDeadLetters(ctx, client.DeadLetterFilter{})
	require.NoError(t, err)
	require.Len(t, open.DeadLetters, 1, "only the permanent failure is still open")

	// Fail-silently types end FAILED without a dead letter.
	_, err = sys.api.UpdateType(ctx, "ax.flaky", contracts.TaskTypeUpdate{FailSilently: ptr(true)})
	require.NoError(t, err)
	sys.expireTypeCaches()
	quiet, err := sys.api.Submit(ctx, contracts.SubmitRequest{Type: "ax.flaky", MaxRetries: ptr(0),
		Payload: json.RawMessage(`{"fail_times":1}`)})
	require.NoError(t, err)
	waitStatus(t, sys.api, quiet.ID, contracts.StatusFailed, 30*time.Second)
	all, err := sys.api.ListDeadLetters(ctx, client.DeadLetterFilter{All: true})
	require.NoError(t, err)
	for _, d := range all.DeadLetters {
		require.NotEqual(t, quiet.ID, d.TaskID, "fail-silently task filed a dead letter")
	}
}

// TestHandlersThatHangOrPanic: a handler that ignores its context is
// abandoned at its deadline (TIMEOUT, worker reclaimed); a panic becomes a
// failure with the stack in history.
func TestHandlersThatHangOrPanic(t *testing.T) {
	_, k := testenv.Redis(t)
	release := make(chan struct{})
	defer close(release)
	sys := startSystem(t, "127.0.0.1:6379", k.Prefix, func(c *app.Config) {
		c.Types = append(c.Types,
			executor.TypeSpec{Name: "test.stubborn", Timeout: 200 * time.Millisecond, Concurrency: 1,
				Handler: executor.HandlerFunc(func(context.Context, *executor.Task) error {
					<-release // ignores its context on purpose
					return nil
				})},
			executor.TypeSpec{Name: "test.panics", Handler: executor.HandlerFunc(func(context.Context, *executor.Task) error {
				var m map[string]int
				m["boom"]++ // nil map write
				return nil
			})},
		)
	})
	ctx := context.Background()
	start := time.Now()
	var stubborn []string
	for range 2 {
		task, err := sys.api.Submit(ctx, contracts.SubmitRequest{Type: "test.stubborn", MaxRetries: ptr(0)})
		require.NoError(t, err)
		stubborn = append(stubborn, task.ID)
	}
	for _, id := range stubborn {
		task := waitStatus(t, sys.api, id, contracts.StatusTimeout, 20*time.Second)
		require.Contains(t, task.LastError, "abandoned")
	}
	// With one worker, the second ran only after the first's slot was
	// reclaimed: about two deadlines plus two abandon graces, not forever.
	t.Logf("two stubborn tasks timed out on one worker in %s", time.Since(start).Round(time.Millisecond))

	task, err := sys.api.Submit(ctx, contracts.SubmitRequest{Type: "test.panics", MaxRetries: ptr(0)})
	require.NoError(t, err)
	waitStatus(t, sys.api, task.ID, contracts.StatusFailed, 20*time.Second)
	_, h := sequence(t, sys.api, task.ID)
	require.Contains(t, h[2].Reason, "handler panic")
	require.Contains(t, h[2].Reason, "assignment to entry in nil map")
	require.Contains(t, h[2].Reason, "goroutine", "the stack is in the reason")
}

// TestLeanDispatchRunsWithTheTasksOwnSettings: a task due at once reaches
// its executor as a lean dispatch (no payload, no timeout in the message);
// the handler still sees the submitted payload and the task's own timeout,
// read by the claim from the task row.
func TestLeanDispatchRunsWithTheTasksOwnSettings(t *testing.T) {
	_, k := testenv.Redis(t)
	type seen struct {
		payload string
		budget  time.Duration
	}
	got := make(chan seen, 1)
	sys := startSystem(t, "127.0.0.1:6379", k.Prefix, func(c *app.Config) {
		c.Types = append(c.Types, executor.TypeSpec{Name: "test.lean", Timeout: time.Minute,
			Handler: executor.HandlerFunc(func(ctx context.Context, task *executor.Task) error {
				deadline, _ := ctx.Deadline()
				got <- seen{payload: string(task.Payload), budget: time.Until(deadline)}
				return nil
			})})
	})
	leanBefore := testutil.ToFloat64(metrics.DispatchedLean.WithLabelValues("test.lean"))
	task, err := sys.api.Submit(context.Background(), contracts.SubmitRequest{Type: "test.lean",
		Payload: json.RawMessage(`{"order":42}`), Timeout: "3s"})
	require.NoError(t, err)
	var s seen
	select {
	case s = <-got:
	case <-time.After(20 * time.Second):
		t.Fatal("the handler never ran")
	}
	waitStatus(t, sys.api, task.ID, contracts.StatusSuccess, 20*time.Second)
	require.JSONEq(t, `{"order":42}`, s.payload, "the payload comes from the row")
	require.Greater(t, s.budget, time.Second)
	require.LessOrEqual(t, s.budget, 3*time.Second, "the task's own 3 s timeout, not the type's minute")
	require.Equal(t, 1.0, testutil.ToFloat64(metrics.DispatchedLean.WithLabelValues("test.lean"))-leanBefore, "it went out as a lean dispatch")
}

// TestBurstOverFullPoolLosesAndFailsNothing submits 20x the type's pool
// (its cluster-wide limit) to two executors: tasks wait in their lanes
// until the pool has room — none is turned back through RETRYING or uses a
// retry — and every task completes.
func TestBurstOverFullPoolLosesAndFailsNothing(t *testing.T) {
	_, k := testenv.Redis(t)
	sys := startSystem(t, "127.0.0.1:6379", k.Prefix, nil)
	sys.join(t, []app.Service{app.Executor}, func(c *app.Config) { c.Node = "second-executor" })
	ctx := context.Background()
	const pool = 2
	_, err := sys.api.UpdateType(ctx, "ax.sleep", contracts.TaskTypeUpdate{Concurrency: ptr(pool)})
	require.NoError(t, err)
	sys.expireTypeCaches()
	before := testutil.ToFloat64(metrics.ExecutorRejections.WithLabelValues("ax.sleep"))

	const n = 20 * pool
	submitMany(t, sys.api, n, 8, contracts.SubmitRequest{Type: "ax.sleep", MaxRetries: ptr(0), Payload: json.RawMessage(`{"ms":400}`)})
	maxRunning := 0
	testenv.Eventually(t, 120*time.Second, "all tasks SUCCESS", func() bool {
		maxRunning = max(maxRunning, sys.count(t, "status = 'RUNNING'"))
		return sys.count(t, "status = 'SUCCESS'") == n
	})
	lost := testutil.ToFloat64(metrics.ExecutorRejections.WithLabelValues("ax.sleep")) - before
	t.Logf("%d tasks over a pool of %d on two executors: at most %d RUNNING, %.0f claims lost the room to the other executor",
		n, pool, maxRunning, lost)
	require.LessOrEqual(t, maxRunning, pool)
	require.Zero(t, sys.count(t, "status = 'FAILED' OR retry_count > 0 OR attempt <> 1"), "a full pool must not fail tasks or use their retries")
	var retrying int
	require.NoError(t, sys.db.QueryRow(`SELECT COUNT(*) FROM task_history WHERE to_status = 'RETRYING'`).Scan(&retrying))
	require.Zero(t, retrying, "no task turned back through RETRYING")
}

// A task due at once reaches its executor as a lean dispatch, which does
// not say the task's timeout: the lease taken before the claim is sized by
// the type's timeout, and a task with a timeout of its own has its lease
// resized right after the claim. Either way a running task's lease covers
// its own timeout (plus the grace an abandoned handler gets), longer or
// shorter than the type's, and never the shorter --lock-ttl.
func TestLeanClaimsHoldLeasesAsLongAsTheirTasksTimeout(t *testing.T) {
	rdb, k := testenv.Redis(t)
	sys := startSystem(t, "127.0.0.1:6379", k.Prefix, nil)
	ctx := context.Background()
	typ, err := sys.api.GetType(ctx, "ax.sleep")
	require.NoError(t, err)
	typeTimeout, err := time.ParseDuration(typ.Timeout)
	require.NoError(t, err)
	require.Greater(t, typeTimeout, 2*time.Minute, "the type's timeout must exceed --lock-ttl for this test")

	cases := []struct {
		timeout string
		want    time.Duration
	}{
		{"", typeTimeout},
		{"20m", 20 * time.Minute},
		{"90s", 90 * time.Second},
	}
	ids := make([]string, len(cases))
	for i, c := range cases {
		task, err := sys.api.Submit(ctx, contracts.SubmitRequest{Type: "ax.sleep", Timeout: c.timeout,
			Payload: json.RawMessage(`{"ms":4000}`)})
		require.NoError(t, err)
		ids[i] = task.ID
	}
	for i, c := range cases {
		waitStatus(t, sys.api, ids[i], contracts.StatusRunning, 15*time.Second)
		id, err := strconv.ParseInt(ids[i], 10, 64)
		require.NoError(t, err)
		// The resize follows the claim at once (RUNNING may show a moment
		// before it); the window allows for the seconds since, never for a
		// lease sized by anything else.
		want := c.want + executor.AbandonGrace
		testenv.Eventually(t, 2*time.Second, fmt.Sprintf("lease of task %s (timeout %q) within 5s under %s", ids[i], c.timeout, want), func() bool {
			ttl, err := rdb.PTTL(ctx, k.Lock(id)).Result()
			require.NoError(t, err)
			return ttl > want-5*time.Second && ttl <= want
		})
	}
}
