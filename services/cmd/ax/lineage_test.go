package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/idgen"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
	"github.com/axsched/ax/services/submitter"
)

// apiServer serves the submitter's API on a real store, for CLI tests.
func apiServer(t *testing.T) (*store.Store, string) {
	t.Helper()
	st, _ := testenv.Store(t)
	for _, name := range []string{"shop.charge", "shop.sms"} {
		require.NoError(t, st.RegisterType(context.Background(), store.TaskType{Name: name, TimeoutMs: 60000, MaxRetries: 0, Priority: contracts.PriorityNormal}))
	}
	ids, err := idgen.New(1)
	require.NoError(t, err)
	mux := http.NewServeMux()
	submitter.New(submitter.Config{Node: "test"}, st, ids, clock.System{}, testenv.Logger(t)).Routes(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return st, srv.URL
}

// The question lineage is for: why did order-42 get no SMS? charge failed
// for good on node-7 with "card declined", so sms was cancelled; the tree
// says so, with the node, the time and the error.
func TestLineageTreeSaysWhyTheSMSWasNotSent(t *testing.T) {
	st, api := apiServer(t)
	file := filepath.Join(t.TempDir(), "order.json")
	require.NoError(t, os.WriteFile(file, []byte(`{"name":"order","biz_key":"order-42","steps":[
		{"key":"charge","type":"shop.charge","payload":{"cents":1999}},
		{"key":"sms","type":"shop.sms","depends_on":["charge"]}]}`), 0o600))
	out, err := runAx(t, "workflow", "submit", "-f", file, "--api", api)
	require.NoError(t, err, out)
	require.Contains(t, out, `"order" biz_key=order-42: RUNNING`)
	var charge, sms int64
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && (f[0] == "charge" || f[0] == "sms") {
			id, err := strconv.ParseInt(f[1], 10, 64)
			require.NoError(t, err)
			if f[0] == "charge" {
				charge = id
			} else {
				sms = id
			}
		}
	}
	require.NotZero(t, charge, out)

	ctx := context.Background()
	res, err := st.Transfer(ctx, store.TransferParams{TaskID: charge, From: contracts.StatusReady, To: contracts.StatusRunning,
		Claim: true, Executor: "node-7", Actor: "executor@node-7", Reason: "claimed by node-7"})
	require.NoError(t, err)
	msg := "card declined"
	_, err = st.Transfer(ctx, store.TransferParams{TaskID: charge, From: contracts.StatusRunning, To: contracts.StatusFailed,
		Attempt: &res.Attempt, LastError: &msg, Actor: "executor@node-7", Reason: "handler failed on node-7 (no retries left of 0)"})
	require.NoError(t, err)

	start := time.Now()
	out, err = runAx(t, "lineage", "--biz-key", "order-42", "--api", api)
	require.NoError(t, err, out)
	t.Logf("ax lineage --biz-key order-42 (%s):\n%s", time.Since(start).Round(time.Millisecond), out)
	for _, want := range []string{
		`workflow`, `"order" biz_key=order-42: FAILED (step "charge" (task ` + strconv.FormatInt(charge, 10) + `) ended FAILED)`,
		"└─ charge  task " + strconv.FormatInt(charge, 10) + "  shop.charge  FAILED",
		"attempt 1 on executor@node-7",
		"last error: card declined",
		"└─ sms  task " + strconv.FormatInt(sms, 10) + "  shop.sms  CANCELLED",
		fmt.Sprintf("CANCELLED at %s", time.Now().UTC().Format("2006-01-02")),
		fmt.Sprintf("parent %d ended FAILED; this task runs only when it succeeds", charge),
	} {
		require.Contains(t, out, want)
	}
	// The sms line sits under charge's.
	require.Less(t, strings.Index(out, "charge  task"), strings.Index(out, "sms  task"))

	// The failed order is found by its state; a running state lists nothing.
	list, err := runAx(t, "workflow", "list", "--status", "FAILED", "--api", api)
	require.NoError(t, err, list)
	t.Logf("ax workflow list --status FAILED:\n%s", list)
	require.Regexp(t, `(?m)^ID\s+NAME\s+BIZ KEY\s+STATUS\s+OPEN STEPS\s+CREATED\s+REASON$`, list)
	require.Regexp(t, `(?m)^\d+\s+order\s+order-42\s+FAILED\s+0\s+\S+\s+step "charge"`, list)
	list, err = runAx(t, "workflow", "list", "--status", "RUNNING", "--api", api)
	require.NoError(t, err, list)
	require.NotContains(t, list, "order-42")
	_, err = runAx(t, "workflow", "list", "--status", "DONE", "--api", api)
	require.ErrorContains(t, err, "want one of RUNNING")
	stats, err := runAx(t, "stats", "--api", api)
	require.NoError(t, err, stats)
	require.Contains(t, stats, "workflows: FAILED 1\n")

	byID, err := runAx(t, "lineage", strconv.FormatInt(sms, 10), "--api", api)
	require.NoError(t, err)
	require.Equal(t, out, byID, "the task's lineage is its workflow's")
	_, err = runAx(t, "lineage", "--api", api)
	require.ErrorContains(t, err, "give a task ID or --biz-key")
	out, err = runAx(t, "lineage", "--biz-key", "order-0", "--api", api)
	require.NoError(t, err)
	require.Contains(t, out, "no workflow or task has biz_key order-0")

	out, err = runAx(t, "workflow", "cancel", strconv.FormatInt(charge, 10), "--api", api)
	require.Error(t, err, out)
}

func TestWorkflowAndParentCommands(t *testing.T) {
	_, api := apiServer(t)
	out, err := runAx(t, "task", "submit", "--type", "shop.charge", "--api", api, "-o", "json")
	require.NoError(t, err, out)
	var parent contracts.Task
	require.NoError(t, json.Unmarshal([]byte(out), &parent))
	out, err = runAx(t, "task", "submit", "--type", "shop.sms", "--parent", parent.ID, "--when", "always", "--api", api)
	require.NoError(t, err, out)
	require.Contains(t, out, "SUSPEND")

	cmd := newRootCmd()
	var buf bytes.Buffer
	cmd.SetOut(&buf)
	cmd.SetIn(strings.NewReader(`{"name":"pair","steps":[{"key":"a","type":"shop.charge","compensate":{"type":"shop.sms"}},
		{"key":"b","type":"shop.sms","depends_on":["a"],"when":"failure"}]}`))
	cmd.SetArgs([]string{"workflow", "submit", "-f", "-", "--api", api, "-o", "json"})
	require.NoError(t, cmd.ExecuteContext(t.Context()))
	var wf contracts.Workflow
	require.NoError(t, json.Unmarshal(buf.Bytes(), &wf))
	out, err = runAx(t, "workflow", "get", wf.ID, "--api", api)
	require.NoError(t, err, out)
	require.Contains(t, out, `"pair": RUNNING`)
	require.Regexp(t, `b\s+\d+\s+shop.sms\s+SUSPEND\s+a \(failure\)`, out)
	require.Regexp(t, `a\s+\d+\s+shop.charge\s+READY\s+-\s+\d+ SUSPEND`, out)
	out, err = runAx(t, "workflow", "cancel", wf.ID, "--api", api)
	require.NoError(t, err, out)
	require.Contains(t, out, `"pair": CANCELLED`)
	_, err = runAx(t, "workflow", "cancel", wf.ID, "--api", api)
	require.ErrorContains(t, err, "illegal_transition")
}
