package submitter_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
)

// submitWorkflow posts body and decodes the workflow answered.
func (f *fixture) submitWorkflow(t *testing.T, body string) contracts.Workflow {
	t.Helper()
	rec := f.do(t, http.MethodPost, "/v1/workflows", strings.NewReader(body))
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	var wf contracts.Workflow
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &wf))
	return wf
}

func (f *fixture) workflow(t *testing.T, id string) contracts.Workflow {
	t.Helper()
	rec := f.do(t, http.MethodGet, "/v1/workflows/"+id, nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var wf contracts.Workflow
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &wf))
	return wf
}

// stepIDs maps a workflow's step keys to task IDs.
func stepIDs(t *testing.T, wf contracts.Workflow) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	for _, st := range wf.Steps {
		id, err := strconv.ParseInt(st.TaskID, 10, 64)
		require.NoError(t, err)
		out[st.Key] = id
	}
	return out
}

// finish runs task id as an executor would: claimed, then ended in to
// (FAILED and TIMEOUT for good: no retry follows).
func finish(t *testing.T, st *store.Store, id int64, to contracts.Status) {
	t.Helper()
	ctx := context.Background()
	res, err := st.Transfer(ctx, store.TransferParams{TaskID: id, From: contracts.StatusReady, To: contracts.StatusRunning,
		Claim: true, Executor: "test-node", Actor: "executor@test-node", Reason: "claimed"})
	require.NoError(t, err)
	attempt := res.Attempt
	msg := "boom"
	p := store.TransferParams{TaskID: id, From: contracts.StatusRunning, To: to, Attempt: &attempt, Reason: "handler returned"}
	if to != contracts.StatusSuccess {
		p.LastError = &msg
	}
	_, err = st.Transfer(ctx, p)
	require.NoError(t, err)
}

func statusOf(t *testing.T, st *store.Store, id int64) contracts.Status {
	t.Helper()
	task, err := st.GetTask(context.Background(), id)
	require.NoError(t, err)
	return task.Status
}

func requireStatuses(t *testing.T, st *store.Store, ids map[string]int64, want map[string]contracts.Status) {
	t.Helper()
	for key, s := range want {
		require.Equal(t, s, statusOf(t, st, ids[key]), "step %s", key)
	}
}

func TestWorkflowDiamondReleasesEachChildOnceItsParentsSucceed(t *testing.T) {
	f := newFixture(t)
	wf := f.submitWorkflow(t, `{"name":"diamond","biz_key":"d-1","steps":[
		{"key":"a","type":"ax.noop"},
		{"key":"b","type":"ax.noop","depends_on":["a"]},
		{"key":"c","type":"ax.noop","depends_on":["a"]},
		{"key":"d","type":"ax.noop","depends_on":["b","c"]}]}`)
	require.Equal(t, contracts.WorkflowRunning, wf.Status)
	ids := stepIDs(t, wf)
	require.Len(t, ids, 4)
	S, R := contracts.StatusSuspend, contracts.StatusReady
	requireStatuses(t, f.st, ids, map[string]contracts.Status{"a": R, "b": S, "c": S, "d": S})

	finish(t, f.st, ids["a"], contracts.StatusSuccess)
	requireStatuses(t, f.st, ids, map[string]contracts.Status{"b": R, "c": R, "d": S})
	finish(t, f.st, ids["b"], contracts.StatusSuccess)
	requireStatuses(t, f.st, ids, map[string]contracts.Status{"d": S})
	finish(t, f.st, ids["c"], contracts.StatusSuccess)
	requireStatuses(t, f.st, ids, map[string]contracts.Status{"d": R})
	require.Equal(t, contracts.WorkflowRunning, f.workflow(t, wf.ID).Status)
	finish(t, f.st, ids["d"], contracts.StatusSuccess)
	require.Equal(t, contracts.WorkflowSucceeded, f.workflow(t, wf.ID).Status)

	// d was released once, with a history row naming both parents.
	h, err := f.st.History(context.Background(), ids["d"])
	require.NoError(t, err)
	require.Equal(t, contracts.StatusSuspend, h[1].From)
	require.Equal(t, contracts.StatusReady, h[1].To)
	require.Contains(t, h[1].Reason, strconv.FormatInt(ids["b"], 10)+" SUCCESS")
	require.Contains(t, h[1].Reason, strconv.FormatInt(ids["c"], 10)+" SUCCESS")

	// A step with a delay of its own keeps it when released.
	wf2 := f.submitWorkflow(t, `{"name":"later","steps":[
		{"key":"a","type":"ax.noop"},
		{"key":"b","type":"ax.noop","depends_on":["a"],"delay":"30m"}]}`)
	ids2 := stepIDs(t, wf2)
	finish(t, f.st, ids2["a"], contracts.StatusSuccess)
	b, err := f.st.GetTask(context.Background(), ids2["b"])
	require.NoError(t, err)
	require.Equal(t, contracts.StatusReady, b.Status)
	require.Greater(t, b.NextRunTimeMs, time.Now().Add(29*time.Minute).UnixMilli(), "still due in 30 minutes")

	// The same name and biz_key is the same workflow.
	rec := f.do(t, http.MethodPost, "/v1/workflows", strings.NewReader(`{"name":"diamond","biz_key":"d-1","steps":[{"key":"x","type":"ax.noop"}]}`))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), `"deduplicated":true`)
	require.Contains(t, rec.Body.String(), wf.ID)
}

func TestWorkflowConditionsRunFailureAndAlwaysBranches(t *testing.T) {
	f := newFixture(t)
	wf := f.submitWorkflow(t, `{"name":"branches","steps":[
		{"key":"charge","type":"ax.noop"},
		{"key":"sms","type":"ax.noop","depends_on":["charge"]},
		{"key":"refund-alert","type":"ax.noop","depends_on":["charge"],"when":"failure"},
		{"key":"audit","type":"ax.noop","depends_on":["charge"],"when":"always"},
		{"key":"after-sms","type":"ax.noop","depends_on":["sms"],"when":"always"}]}`)
	ids := stepIDs(t, wf)
	finish(t, f.st, ids["charge"], contracts.StatusFailed)
	requireStatuses(t, f.st, ids, map[string]contracts.Status{
		"sms": contracts.StatusCancelled, "refund-alert": contracts.StatusReady, "audit": contracts.StatusReady,
		// always: a cancelled parent has ended too.
		"after-sms": contracts.StatusReady,
	})
	h, err := f.st.History(context.Background(), ids["sms"])
	require.NoError(t, err)
	require.Contains(t, h[len(h)-1].Reason, fmt.Sprintf("parent %d ended FAILED", ids["charge"]))

	// The failure is handled by a branch: the workflow goes on.
	require.Equal(t, contracts.WorkflowRunning, f.workflow(t, wf.ID).Status)
	for _, k := range []string{"refund-alert", "audit", "after-sms"} {
		finish(t, f.st, ids[k], contracts.StatusSuccess)
	}
	require.Equal(t, contracts.WorkflowSucceeded, f.workflow(t, wf.ID).Status)

	// On success the failure branch is cancelled instead.
	wf = f.submitWorkflow(t, `{"name":"branches","steps":[
		{"key":"charge","type":"ax.noop"},
		{"key":"refund-alert","type":"ax.noop","depends_on":["charge"],"when":"failure"}]}`)
	ids = stepIDs(t, wf)
	finish(t, f.st, ids["charge"], contracts.StatusSuccess)
	require.Equal(t, contracts.StatusCancelled, statusOf(t, f.st, ids["refund-alert"]))
	require.Equal(t, contracts.WorkflowSucceeded, f.workflow(t, wf.ID).Status)
}

func (f *fixture) workflowCount(t *testing.T) [3]int {
	t.Helper()
	var c [3]int
	for i, table := range []string{"workflows", "workflow_steps", "task_dependencies"} {
		require.NoError(t, f.st.DB().QueryRow("SELECT COUNT(*) FROM "+table).Scan(&c[i]))
	}
	return c
}

func TestWorkflowRejectsBadInputAndCreatesNothing(t *testing.T) {
	f := newFixture(t)
	step := func(key string, deps ...string) string {
		d, _ := json.Marshal(deps)
		return fmt.Sprintf(`{"key":%q,"type":"ax.noop","depends_on":%s}`, key, d)
	}
	steps := func(s ...string) string { return `{"name":"w","steps":[` + strings.Join(s, ",") + `]}` }
	many := make([]string, contracts.MaxWorkflowSteps+1)
	for i := range many {
		many[i] = step("s" + strconv.Itoa(i))
	}
	tests := []struct {
		name, body, detail string
		status             int
	}{
		{"cycle", steps(step("start"), step("a", "start", "c"), step("b", "a"), step("c", "b")),
			"the steps form a cycle: a -> b -> c -> a", 400},
		{"unknown key", steps(step("a"), step("b", "nope")), `step "b" depends on unknown step "nope"`, 400},
		{"duplicate key", steps(step("a"), step("a")), `step key "a" is used twice`, 400},
		{"self", steps(step("a", "a")), `step "a" depends on itself`, 400},
		{"twice in depends_on", steps(step("a"), step("b", "a", "a")), `lists "a" twice`, 400},
		{"too many", steps(many...), "steps holds 1001 steps", 400},
		{"no steps", `{"name":"w","steps":[]}`, "steps holds 0 steps", 400},
		{"no name", `{"steps":[{"key":"a","type":"ax.noop"}]}`, "name is required", 400},
		{"bad when", `{"name":"w","steps":[{"key":"a","type":"ax.noop"},{"key":"b","type":"ax.noop","depends_on":["a"],"when":"sometimes"}]}`,
			`when "sometimes" is not one of success, failure, always`, 400},
		{"when without parents", `{"name":"w","steps":[{"key":"a","type":"ax.noop","when":"always"}]}`, "depends_on is empty", 400},
		{"unknown type", `{"name":"w","steps":[{"key":"a","type":"no.such"}]}`, `step "a": task type "no.such" is not registered`, 400},
		{"bad compensation", `{"name":"w","steps":[{"key":"a","type":"ax.noop","compensate":{"type":"ax.noop","delay":"soon"}}]}`,
			`step "a.compensate": delay "soon"`, 400},
		{"unknown field", `{"name":"w","steps":[{"key":"a","type":"ax.noop","depends":["x"]}]}`, "unknown field", 400},
	}
	before, beforeWF := f.rowCounts(t), f.workflowCount(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := f.do(t, http.MethodPost, "/v1/workflows", strings.NewReader(tc.body))
			require.Equal(t, tc.status, rec.Code, rec.Body.String())
			require.Contains(t, problemOf(t, rec).Detail, tc.detail)
		})
	}
	require.Equal(t, before, f.rowCounts(t), "a rejected workflow writes nothing")
	require.Equal(t, beforeWF, f.workflowCount(t))
}

func TestSubmitWithParentsWaitsSettlesAtOnceAndRejectsUnknownParents(t *testing.T) {
	f := newFixture(t)
	submit := func(body string) (int, contracts.Task, string) {
		rec := f.do(t, http.MethodPost, "/v1/tasks", strings.NewReader(body))
		var task contracts.Task
		_ = json.Unmarshal(rec.Body.Bytes(), &task)
		return rec.Code, task, rec.Body.String()
	}
	code, parent, body := submit(`{"type":"ax.noop"}`)
	require.Equal(t, http.StatusCreated, code, body)
	code, child, body := submit(`{"type":"ax.noop","parents":["` + parent.ID + `"]}`)
	require.Equal(t, http.StatusCreated, code, body)
	require.Equal(t, contracts.StatusSuspend, child.Status)

	pid, _ := strconv.ParseInt(parent.ID, 10, 64)
	cid, _ := strconv.ParseInt(child.ID, 10, 64)
	finish(t, f.st, pid, contracts.StatusSuccess)
	require.Equal(t, contracts.StatusReady, statusOf(t, f.st, cid))

	// A parent that has ended is judged at once.
	code, late, body := submit(`{"type":"ax.noop","parents":["` + parent.ID + `"],"when":"failure"}`)
	require.Equal(t, http.StatusCreated, code, body)
	require.Equal(t, contracts.StatusCancelled, late.Status)
	code, late, body = submit(`{"type":"ax.noop","parents":["` + parent.ID + `"]}`)
	require.Equal(t, http.StatusCreated, code, body)
	require.Equal(t, contracts.StatusReady, late.Status)

	before := f.rowCounts(t)
	for _, bad := range []struct{ body, detail string }{
		{`{"type":"ax.noop","parents":["` + parent.ID + `","99999999"]}`, "no task with id 99999999"},
		{`{"type":"ax.noop","parents":["x"]}`, `parent "x" is not a task ID`},
		{`{"type":"ax.noop","parents":["` + parent.ID + `","` + parent.ID + `"]}`, "listed twice"},
		{`{"type":"ax.noop","when":"always"}`, "parents is empty"},
		{`{"type":"ax.noop","parents":["` + parent.ID + `"],"when":"never"}`, `when "never"`},
	} {
		rec := f.do(t, http.MethodPost, "/v1/tasks", strings.NewReader(bad.body))
		require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
		require.Contains(t, problemOf(t, rec).Detail, bad.detail)
	}
	require.Equal(t, before, f.rowCounts(t))
}

// Parents of one child ending at the same moment, each in its own
// transaction: exactly one of them releases the child, never none.
func TestParentsEndingTogetherReleaseTheChildExactlyOnce(t *testing.T) {
	f := newFixture(t)
	const parents, rounds = 8, 5
	for range rounds {
		var steps []string
		var keys []string
		for i := range parents {
			k := "p" + strconv.Itoa(i)
			keys = append(keys, `"`+k+`"`)
			steps = append(steps, fmt.Sprintf(`{"key":%q,"type":"ax.noop"}`, k))
		}
		steps = append(steps, `{"key":"join","type":"ax.noop","depends_on":[`+strings.Join(keys, ",")+`]}`)
		wf := f.submitWorkflow(t, `{"name":"fan-in","steps":[`+strings.Join(steps, ",")+`]}`)
		ids := stepIDs(t, wf)
		var wg sync.WaitGroup
		for i := range parents {
			wg.Go(func() { finish(t, f.st, ids["p"+strconv.Itoa(i)], contracts.StatusSuccess) })
		}
		wg.Wait()
		h, err := f.st.History(context.Background(), ids["join"])
		require.NoError(t, err)
		require.Len(t, h, 2, "created, then released once")
		require.Equal(t, contracts.StatusReady, h[1].To)
	}
}

// historyIndex returns the position, among every history row of the
// database, of task id's move to to: the order in which transfers happened.
func historyIndex(t *testing.T, st *store.Store, id int64, to contracts.Status) int64 {
	t.Helper()
	var n int64
	require.NoError(t, st.DB().QueryRow(`SELECT MIN(id) FROM task_history WHERE task_id = ? AND to_status = ?`, id, string(to)).Scan(&n))
	return n
}

func TestWorkflowCompensatesSucceededStepsInReverseOrder(t *testing.T) {
	f := newFixture(t)
	wf := f.submitWorkflow(t, `{"name":"trip","biz_key":"trip-7","steps":[
		{"key":"flight","type":"ax.noop","compensate":{"type":"ax.noop","payload":{"undo":"flight"}}},
		{"key":"hotel","type":"ax.noop","depends_on":["flight"],"compensate":{"type":"ax.noop","payload":{"undo":"hotel"}}},
		{"key":"car","type":"ax.noop","depends_on":["hotel"],"compensate":{"type":"ax.noop"}},
		{"key":"pay","type":"ax.noop","depends_on":["car"]}]}`)
	ids := stepIDs(t, wf)
	comp := map[string]int64{}
	for _, st := range wf.Steps {
		if st.CompensationTaskID != "" {
			comp[st.Key], _ = strconv.ParseInt(st.CompensationTaskID, 10, 64)
			require.Equal(t, contracts.StatusSuspend, st.CompensationStatus)
		}
	}
	require.Len(t, comp, 3)
	for _, k := range []string{"flight", "hotel", "car"} {
		finish(t, f.st, ids[k], contracts.StatusSuccess)
	}
	finish(t, f.st, ids["pay"], contracts.StatusFailed)
	got := f.workflow(t, wf.ID)
	require.Equal(t, contracts.WorkflowCompensating, got.Status)
	require.Contains(t, got.Reason, `step "pay"`)
	require.Equal(t, contracts.StatusReady, statusOf(t, f.st, comp["car"]), "the last step is undone first")
	require.Equal(t, contracts.StatusSuspend, statusOf(t, f.st, comp["hotel"]))

	// Each compensation is an ordinary task: run them as they come.
	for range 3 {
		for _, k := range []string{"car", "hotel", "flight"} {
			if statusOf(t, f.st, comp[k]) == contracts.StatusReady {
				finish(t, f.st, comp[k], contracts.StatusSuccess)
			}
		}
	}
	require.Equal(t, contracts.WorkflowCompensated, f.workflow(t, wf.ID).Status)
	// The order, read from history: car, then hotel, then flight.
	car, hotel, flight := historyIndex(t, f.st, comp["car"], contracts.StatusRunning),
		historyIndex(t, f.st, comp["hotel"], contracts.StatusRunning), historyIndex(t, f.st, comp["flight"], contracts.StatusRunning)
	require.Less(t, car, hotel)
	require.Less(t, hotel, flight)
	require.Less(t, historyIndex(t, f.st, comp["car"], contracts.StatusSuccess), hotel, "hotel starts after car ended")

	// A failing compensation does not stop the others, and is reported.
	wf = f.submitWorkflow(t, `{"name":"trip","steps":[
		{"key":"a","type":"ax.noop","compensate":{"type":"ax.noop"}},
		{"key":"b","type":"ax.noop","depends_on":["a"],"compensate":{"type":"ax.noop"}},
		{"key":"c","type":"ax.noop","depends_on":["b"],"compensate":{"type":"ax.noop"}}]}`)
	ids = stepIDs(t, wf)
	finish(t, f.st, ids["a"], contracts.StatusSuccess)
	finish(t, f.st, ids["b"], contracts.StatusSuccess)
	finish(t, f.st, ids["c"], contracts.StatusTimeout)
	got = f.workflow(t, wf.ID)
	require.Equal(t, contracts.WorkflowCompensating, got.Status)
	compOf := func(key string) int64 {
		for _, st := range f.workflow(t, wf.ID).Steps {
			if st.Key == key {
				id, _ := strconv.ParseInt(st.CompensationTaskID, 10, 64)
				return id
			}
		}
		return 0
	}
	require.Equal(t, contracts.StatusCancelled, statusOf(t, f.st, compOf("c")), "the failed step is not undone")
	finish(t, f.st, compOf("b"), contracts.StatusFailed)
	finish(t, f.st, compOf("a"), contracts.StatusSuccess)
	require.Equal(t, contracts.WorkflowCompensationFailed, f.workflow(t, wf.ID).Status)

	// Nothing to compensate: the workflow simply fails, and unused
	// compensations are cancelled.
	wf = f.submitWorkflow(t, `{"name":"trip","steps":[{"key":"a","type":"ax.noop","compensate":{"type":"ax.noop"}}]}`)
	ids = stepIDs(t, wf)
	finish(t, f.st, ids["a"], contracts.StatusFailed)
	require.Equal(t, contracts.WorkflowFailed, f.workflow(t, wf.ID).Status)
	require.Equal(t, contracts.StatusCancelled, statusOf(t, f.st, compOf("a")))
}

func TestWorkflowCancelCancelsEveryOpenStep(t *testing.T) {
	f := newFixture(t)
	wf := f.submitWorkflow(t, `{"name":"c","steps":[
		{"key":"a","type":"ax.noop","compensate":{"type":"ax.noop"}},
		{"key":"b","type":"ax.noop"},
		{"key":"c","type":"ax.noop","depends_on":["a","b"]}]}`)
	ids := stepIDs(t, wf)
	finish(t, f.st, ids["a"], contracts.StatusSuccess)
	_, err := f.st.Transfer(context.Background(), store.TransferParams{TaskID: ids["b"], From: contracts.StatusReady,
		To: contracts.StatusRunning, Claim: true, Executor: "n", Reason: "claimed"})
	require.NoError(t, err)
	rec := f.do(t, http.MethodPost, "/v1/workflows/"+wf.ID+"/cancel", nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	got := f.workflow(t, wf.ID)
	require.Equal(t, contracts.WorkflowCancelled, got.Status)
	for _, st := range got.Steps {
		want := contracts.StatusCancelled
		if st.Key == "a" {
			want = contracts.StatusSuccess
			require.Equal(t, contracts.StatusCancelled, st.CompensationStatus, "cancelling does not compensate")
		}
		require.Equal(t, want, st.Status, st.Key)
	}
	rec = f.do(t, http.MethodPost, "/v1/workflows/"+wf.ID+"/cancel", nil)
	require.Equal(t, http.StatusConflict, rec.Code, rec.Body.String())
	for _, path := range []string{"/v1/workflows/999", "/v1/workflows/x"} {
		require.Equal(t, http.StatusNotFound, f.do(t, http.MethodGet, path, nil).Code)
	}
}

// The question lineage answers: why did order-42 get no SMS?
func TestLineageShowsWhySMSWasCancelled(t *testing.T) {
	f := newFixture(t)
	wf := f.submitWorkflow(t, `{"name":"order","biz_key":"order-42","steps":[
		{"key":"charge","type":"ax.noop","max_retries":0},
		{"key":"sms","type":"ax.noop","depends_on":["charge"]}]}`)
	ids := stepIDs(t, wf)
	finish(t, f.st, ids["charge"], contracts.StatusFailed)

	for _, path := range []string{"/v1/lineage?biz_key=order-42", "/v1/tasks/" + strconv.FormatInt(ids["sms"], 10) + "/lineage"} {
		rec := f.do(t, http.MethodGet, path, nil)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var l contracts.Lineage
		if strings.HasPrefix(path, "/v1/lineage") {
			var list contracts.LineageList
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &list))
			require.Len(t, list.Lineages, 1)
			l = list.Lineages[0]
		} else {
			require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &l))
		}
		require.NotNil(t, l.Workflow)
		require.Equal(t, "order-42", l.Workflow.BizKey)
		require.Equal(t, contracts.WorkflowFailed, l.Workflow.Status)
		require.Len(t, l.Tasks, 2)
		charge, sms := l.Tasks[0], l.Tasks[1]
		require.Equal(t, "charge", charge.StepKey)
		require.Equal(t, contracts.StatusFailed, charge.Status)
		require.Equal(t, "boom", charge.LastError)
		require.Len(t, charge.Attempts, 1)
		require.Equal(t, "executor@test-node", charge.Attempts[0].Node)
		require.Equal(t, contracts.StatusFailed, charge.Attempts[0].Outcome)
		require.NotNil(t, charge.Attempts[0].EndedAt)
		require.Equal(t, contracts.StatusCancelled, sms.Status)
		require.Contains(t, sms.Reason, fmt.Sprintf("parent %d ended FAILED", ids["charge"]))
		require.Equal(t, []contracts.LineageEdge{{Parent: charge.ID, Child: sms.ID, When: contracts.WhenSuccess}}, l.Edges)
	}
	rec := f.do(t, http.MethodGet, "/v1/lineage?biz_key=nobody", nil)
	require.Equal(t, http.StatusOK, rec.Code)
	require.JSONEq(t, `{"biz_key":"nobody","lineages":[]}`, rec.Body.String())
	require.Equal(t, http.StatusBadRequest, f.do(t, http.MethodGet, "/v1/lineage", nil).Code)
	require.Equal(t, http.StatusNotFound, f.do(t, http.MethodGet, "/v1/tasks/12345/lineage", nil).Code)
}

// Outside a workflow, a task's lineage is what its dependencies reach,
// both ways; by business key it is found through its type.
func TestLineageOfTasksLinkedByParents(t *testing.T) {
	f := newFixture(t)
	submit := func(body string) contracts.Task {
		rec := f.do(t, http.MethodPost, "/v1/tasks", strings.NewReader(body))
		require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
		var task contracts.Task
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &task))
		return task
	}
	root := submit(`{"type":"ax.noop","biz_key":"invoice-9"}`)
	mid := submit(`{"type":"ax.noop","parents":["` + root.ID + `"]}`)
	leaf := submit(`{"type":"ax.noop","parents":["` + mid.ID + `"],"when":"always"}`)
	other := submit(`{"type":"ax.noop"}`)

	rec := f.do(t, http.MethodGet, "/v1/tasks/"+mid.ID+"/lineage", nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var l contracts.Lineage
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &l))
	require.Nil(t, l.Workflow)
	var got []string
	for _, task := range l.Tasks {
		got = append(got, task.ID)
	}
	require.ElementsMatch(t, []string{root.ID, mid.ID, leaf.ID}, got, "not %s, which is unrelated", other.ID)
	require.ElementsMatch(t, []contracts.LineageEdge{
		{Parent: root.ID, Child: mid.ID, When: contracts.WhenSuccess},
		{Parent: mid.ID, Child: leaf.ID, When: contracts.WhenAlways},
	}, l.Edges)

	rec = f.do(t, http.MethodGet, "/v1/lineage?biz_key=invoice-9&type=ax.noop", nil)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var list contracts.LineageList
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &list))
	require.Len(t, list.Lineages, 1)
	require.Len(t, list.Lineages[0].Tasks, 3)
	rec = f.do(t, http.MethodGet, "/v1/lineage?biz_key=invoice-9&type=no.such", nil)
	require.JSONEq(t, `{"biz_key":"invoice-9","lineages":[]}`, rec.Body.String())
}

// Steps of several workflows ending in one batch (an executor's outcomes)
// move every workflow in that one transaction.
func TestStepsOfManyWorkflowsEndingInOneBatch(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	var wfs []contracts.Workflow
	var chains [][]store.TransferParams
	for i := range 4 {
		wf := f.submitWorkflow(t, `{"name":"one","steps":[{"key":"a","type":"ax.noop","compensate":{"type":"ax.noop"}}]}`)
		wfs = append(wfs, wf)
		id := stepIDs(t, wf)["a"]
		res, err := f.st.Transfer(ctx, store.TransferParams{TaskID: id, From: contracts.StatusReady, To: contracts.StatusRunning,
			Claim: true, Executor: "n", Reason: "claimed"})
		require.NoError(t, err)
		to := contracts.StatusSuccess
		if i == 3 {
			to = contracts.StatusFailed
		}
		chains = append(chains, []store.TransferParams{{TaskID: id, From: contracts.StatusRunning, To: to, Attempt: &res.Attempt}})
	}
	out, err := f.st.TransferBatch(ctx, chains)
	require.NoError(t, err)
	for _, r := range out {
		require.NoError(t, r.Err)
	}
	for i, wf := range wfs {
		got := f.workflow(t, wf.ID)
		want := contracts.WorkflowSucceeded
		if i == 3 {
			want = contracts.WorkflowFailed
		}
		require.Equal(t, want, got.Status, "workflow %d", i)
		require.Equal(t, contracts.StatusCancelled, got.Steps[0].CompensationStatus, "not needed")
	}
}

// The answer to POST /v1/workflows is built from what was written; it
// must be what GET answers.
func TestWorkflowAnswerEqualsItsRead(t *testing.T) {
	f := newFixture(t)
	wf := f.submitWorkflow(t, `{"name":"same","biz_key":"s-1","steps":[
		{"key":"a","type":"ax.noop","compensate":{"type":"ax.noop"}},
		{"key":"b","type":"ax.noop"},
		{"key":"c","type":"ax.noop","depends_on":["b","a"],"when":"always"}]}`)
	got := f.workflow(t, wf.ID)
	require.Equal(t, wf, got)
}

// TestWorkflowStepReRunCountsItsEndOnce: a step that failed for good, was
// re-run from its dead letter and succeeded has ended once for its
// workflow, however the re-run was made and whichever release wrote the
// rows: the workflow ends when its last other step does, not before.
func TestWorkflowStepReRunCountsItsEndOnce(t *testing.T) {
	ctx := context.Background()
	for name, c := range map[string]struct {
		legacyRows bool // rows as written before migration 0019
		unmarked   bool // re-run as a release before 0019 did
		// otherFirst: the other step succeeds before charge is re-run,
		// leaving no final_status for a recount to read.
		otherFirst bool
	}{
		"re-run through the dead letter":                     {},
		"re-run unmarked":                                    {unmarked: true},
		"rows without their workflow":                        {legacyRows: true},
		"re-run through the dead letter, another step ended": {otherFirst: true},
		"re-run unmarked, another step ended":                {unmarked: true, otherFirst: true},
	} {
		for _, inTable := range []bool{false, true} {
			if c.legacyRows && !inTable {
				continue // rows before 0019 were never listed on a workflow's row
			}
			name := name
			if inTable {
				name += ", steps in workflow_steps"
			}
			t.Run(name, func(t *testing.T) {
				f := newFixtureWith(t, store.Options{Actor: "test", StepsInTable: inTable})
				wf := f.submitWorkflow(t, `{"name":"rerun","steps":[
				{"key":"charge","type":"ax.noop"},
				{"key":"audit","type":"ax.noop","depends_on":["charge"],"when":"always"},
				{"key":"other","type":"ax.noop"}]}`)
				ids := stepIDs(t, wf)
				if c.legacyRows {
					_, err := f.st.DB().Exec(`UPDATE tasks SET workflow_id = NULL, workflow_role = NULL`)
					require.NoError(t, err)
				}
				charge := ids["charge"]
				res, err := f.st.Transfer(ctx, store.TransferParams{TaskID: charge, From: contracts.StatusReady, To: contracts.StatusRunning,
					Claim: true, Executor: "test-node", Actor: "executor@test-node", Reason: "claimed"})
				require.NoError(t, err)
				attempt, msg := res.Attempt, "card declined"
				_, err = f.st.Transfer(ctx, store.TransferParams{TaskID: charge, From: contracts.StatusRunning, To: contracts.StatusFailed,
					Attempt: &attempt, LastError: &msg, Reason: "handler failed for good",
					Also: store.InsertDeadLetter(store.NewDeadLetter{TaskID: charge, Type: "ax.noop", Status: contracts.StatusFailed, Attempt: attempt, LastError: msg})})
				require.NoError(t, err)
				require.Equal(t, contracts.WorkflowRunning, f.workflow(t, wf.ID).Status, "the failure is handled by audit")
				if c.otherFirst {
					finish(t, f.st, ids["other"], contracts.StatusSuccess)
				}

				due := time.Now().UnixMilli()
				if c.unmarked {
					_, err = f.st.Transfer(ctx, store.TransferParams{TaskID: charge, From: contracts.StatusFailed, To: contracts.StatusRetrying,
						Attempt: &attempt, ResetRetries: true, NextRunTimeMs: &due, Actor: "old-release", Reason: "re-run"})
					require.NoError(t, err)
				} else {
					letters, err := f.st.ListDeadLetters(ctx, store.DeadLetterQuery{Limit: 10})
					require.NoError(t, err)
					require.Len(t, letters, 1)
					_, err = f.st.RetryDeadLetter(ctx, letters[0].ID, "alice", due)
					require.NoError(t, err)
				}
				_, err = f.st.Transfer(ctx, store.TransferParams{TaskID: charge, From: contracts.StatusRetrying, To: contracts.StatusReady, Reason: "due"})
				require.NoError(t, err)
				finish(t, f.st, charge, contracts.StatusSuccess)
				if !c.otherFirst {
					finish(t, f.st, ids["other"], contracts.StatusSuccess)
				}
				require.Equal(t, contracts.WorkflowRunning, f.workflow(t, wf.ID).Status, "audit has not ended")
				finish(t, f.st, ids["audit"], contracts.StatusSuccess)
				require.Equal(t, contracts.WorkflowSucceeded, f.workflow(t, wf.ID).Status)
				var open int
				require.NoError(t, f.st.DB().QueryRow(`SELECT open_steps FROM workflows`).Scan(&open))
				require.Zero(t, open)
			})
		}
	}
}
