package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
)

// fakeAPI answers each "METHOD path" with a queue of canned bodies (the
// last one repeats) and records every request with its query and body.
type fakeAPI struct {
	*httptest.Server
	mu       sync.Mutex
	answers  map[string][]any
	requests []string
}

func newFakeAPI(t *testing.T, answers map[string][]any) *fakeAPI {
	t.Helper()
	f := &fakeAPI{answers: answers}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		key := r.Method + " " + r.URL.Path
		f.mu.Lock()
		f.requests = append(f.requests, strings.TrimSpace(key+"?"+r.URL.RawQuery+" "+string(b)))
		queue := f.answers[key]
		var answer any
		if len(queue) > 0 {
			answer = queue[0]
			if len(queue) > 1 {
				f.answers[key] = queue[1:]
			}
		}
		f.mu.Unlock()
		if answer == nil {
			w.Header().Set("Content-Type", contracts.ProblemContentType)
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(contracts.NewProblem(http.StatusNotFound, contracts.CodeNotFound, "no "+key))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) sent() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.requests
	f.requests = nil
	return out
}

// TestNoFlagUsageHasBackticks: pflag takes a backticked word in a usage
// string for the flag's value name, so "under `ax up`" printed as
// "--nats-url ax up". No flag of any command may have one.
func TestNoFlagUsageHasBackticks(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
			fs.VisitAll(func(fl *pflag.Flag) {
				require.NotContains(t, fl.Usage, "`", "%s --%s", c.CommandPath(), fl.Name)
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
}

func TestUnknownSubcommandsAndBadOutputFailBeforeAnyCall(t *testing.T) {
	api := newFakeAPI(t, nil)
	for _, args := range [][]string{
		{"task", "lst"},
		{"dlq", "nope"},
		{"task", "list", "-o", "yaml"},
		{"task", "cancel", "1", "-o", "xml"},
		{"stats", "-o", "yaml"},
		{"version", "-o", "yaml"},
	} {
		_, err := runAx(t, append(args, "--api", api.URL)...)
		if args[0] == "version" {
			_, err = runAx(t, args...)
		}
		require.Error(t, err, "%v", args)
	}
	require.Empty(t, api.sent(), "nothing was called")
	out, err := runAx(t, "version", "-o", "json")
	require.NoError(t, err)
	var v versionInfo
	require.NoError(t, json.Unmarshal([]byte(out), &v))
	require.Equal(t, latestMigration(), v.Schema)
	require.GreaterOrEqual(t, v.Schema, 15)
}

func TestTaskListSendsTheFilter(t *testing.T) {
	api := newFakeAPI(t, map[string][]any{"GET /v1/tasks": {contracts.TaskList{
		Tasks: []contracts.Task{{ID: "7", Type: "sms.send", Status: contracts.StatusRunning, Executor: "n1"}}, NextCursor: "abc"}}})
	out, err := runAx(t, "task", "list", "--type", "sms.send", "--status", "RUNNING", "--node", "n1",
		"--created-after", "2026-01-02T00:00:00Z", "--limit", "5", "--api", api.URL)
	require.NoError(t, err)
	require.Equal(t, []string{"GET /v1/tasks?created_after=2026-01-02T00%3A00%3A00Z&limit=5&node=n1&status=RUNNING&type=sms.send"}, api.sent())
	require.Contains(t, out, "sms.send")
	require.Contains(t, out, "more: --cursor abc")
}

// TestTaskListBySchedule sends schedule with only limit and cursor, and
// refuses another filter beside it before calling anything.
func TestTaskListBySchedule(t *testing.T) {
	api := newFakeAPI(t, map[string][]any{"GET /v1/tasks": {contracts.TaskList{
		Tasks: []contracts.Task{{ID: "9", Type: "report.build", Status: contracts.StatusSuccess}}}}})
	out, err := runAx(t, "task", "list", "--schedule", "nightly.report", "--limit", "3", "--cursor", "c1", "--api", api.URL)
	require.NoError(t, err)
	require.Equal(t, []string{"GET /v1/tasks?cursor=c1&limit=3&schedule=nightly.report"}, api.sent())
	require.Contains(t, out, "report.build")

	_, err = runAx(t, "task", "list", "--schedule", "nightly.report", "--status", "READY", "--api", api.URL)
	require.ErrorContains(t, err, "--schedule takes no other filter")
	require.Empty(t, api.sent(), "nothing more was called")
}

// TestTaskCancelInBulk: without --yes only the dry run is sent; with it the
// token is confirmed until nothing counted is left.
func TestTaskCancelInBulk(t *testing.T) {
	dry := contracts.BulkResult{DryRun: true, Matched: 1500, Confirm: "tok", Remaining: 1500}
	api := newFakeAPI(t, map[string][]any{"POST /v1/tasks:cancel": {dry}})
	out, err := runAx(t, "task", "cancel", "--status", "READY", "--type", "sms.send", "--api", api.URL)
	require.NoError(t, err)
	require.Contains(t, out, "1500 match; nothing changed (run again with --yes to cancel them)")
	require.Equal(t, []string{`POST /v1/tasks:cancel? {"filter":{"type":"sms.send","status":"READY"},"dry_run":true}`}, api.sent())

	api.answers["POST /v1/tasks:cancel"] = []any{dry,
		contracts.BulkResult{Matched: 1500, Done: 1000, Remaining: 500},
		contracts.BulkResult{Matched: 500, Done: 499, Skipped: 1}}
	out, err = runAx(t, "task", "cancel", "--status", "READY", "--type", "sms.send", "--yes", "--actor", "alice", "--api", api.URL)
	require.NoError(t, err)
	require.Contains(t, out, "1500 matched, 1499 done (cancel), 1 skipped")
	sent := api.sent()
	require.Len(t, sent, 3)
	require.Equal(t, `POST /v1/tasks:cancel? {"filter":{"type":"sms.send","status":"READY"},"confirm":"tok","note":"alice"}`, sent[2])

	_, err = runAx(t, "task", "cancel", "--api", api.URL)
	require.ErrorContains(t, err, "give a task ID")
	_, err = runAx(t, "task", "cancel", "7", "--status", "READY", "--api", api.URL)
	require.ErrorContains(t, err, "not both")
	require.Empty(t, api.sent())
}

// TestDLQRetryTakesATaskID: a task ID is turned into its open letter's ID.
func TestDLQRetryTakesATaskID(t *testing.T) {
	api := newFakeAPI(t, map[string][]any{
		"GET /v1/deadletters": {contracts.DeadLetterList{DeadLetters: []contracts.DeadLetter{{ID: "42", TaskID: "2007029096248250368"}}},
			contracts.DeadLetterList{}},
		"POST /v1/deadletters/42/retry": {contracts.DeadLetter{ID: "42", TaskID: "2007029096248250368", RetriedBy: "key:ops"}},
	})
	out, err := runAx(t, "dlq", "retry", "2007029096248250368", "--actor", "bob", "--api", api.URL)
	require.NoError(t, err)
	require.Contains(t, out, "task 2007029096248250368 re-queued by key:ops (dead letter 42)")
	require.Equal(t, []string{"GET /v1/deadletters?limit=1&task_id=2007029096248250368", "POST /v1/deadletters/42/retry?actor=bob"}, api.sent())

	// Not a task with a letter: taken as the letter's own ID.
	_, err = runAx(t, "dlq", "retry", "42", "--actor", "bob", "--api", api.URL)
	require.NoError(t, err)
	require.Equal(t, []string{"GET /v1/deadletters?limit=1&task_id=42", "POST /v1/deadletters/42/retry?actor=bob"}, api.sent())
}
