package submitter_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
)

// TestConcurrentWorkflowsShareTransactionsCorrectly: with Run running, 120
// concurrent workflow creations (a sixth of them racing on four workflow
// biz_keys) share far fewer transactions than there are workflows, and
// each gets the answer one-by-one creation would give: a new workflow,
// which GET answers the same, with its tasks, edges and history rows, or
// the one workflow of its key.
func TestConcurrentWorkflowsShareTransactionsCorrectly(t *testing.T) {
	f := newFixture(t)
	f.runCoalescing(t)
	commitsBefore := testutil.ToFloat64(metrics.SubmitCommits)
	tasksBefore, wfBefore := f.rowCounts(t), f.workflowCount(t)

	const n = 120
	steps := `"steps":[{"key":"a","type":"ax.noop","compensate":{"type":"ax.noop"}},
		{"key":"b","type":"ax.noop","depends_on":["a"]},
		{"key":"c","type":"ax.noop","depends_on":["b","a"],"when":"always"}]`
	type answer struct {
		code int
		wf   contracts.Workflow
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			body := `{"name":"order",` + steps + `}`
			if i%6 == 0 {
				body = fmt.Sprintf(`{"name":"order","biz_key":"wk%d",%s}`, (i/6)%4, steps)
			}
			rec := f.do(t, http.MethodPost, "/v1/workflows", strings.NewReader(body))
			answers[i].code = rec.Code
			if err := json.Unmarshal(rec.Body.Bytes(), &answers[i].wf); err != nil {
				t.Errorf("workflow %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	commits := testutil.ToFloat64(metrics.SubmitCommits) - commitsBefore
	t.Logf("%d workflow creations in %.0f transactions", n, commits)
	require.Positive(t, commits)
	require.Less(t, commits, float64(n/2), "concurrent workflow creations must share transactions")

	byKey := map[string]string{} // the workflow created for each key
	created := 0
	for i, a := range answers {
		if i%6 != 0 {
			require.Equal(t, http.StatusCreated, a.code, "workflow %d has no key", i)
		}
		if a.code != http.StatusCreated {
			continue
		}
		created++
		require.Equal(t, f.workflow(t, a.wf.ID), a.wf, "workflow %d: the answer is what a read says", i)
		if a.wf.BizKey != "" {
			require.NotContains(t, byKey, a.wf.BizKey, "key %s created twice", a.wf.BizKey)
			byKey[a.wf.BizKey] = a.wf.ID
		}
	}
	for i, a := range answers {
		if a.code != http.StatusCreated {
			require.Equal(t, http.StatusOK, a.code, "workflow %d", i)
			require.True(t, a.wf.Deduplicated)
			require.Equal(t, byKey[a.wf.BizKey], a.wf.ID, "key %s answered with another workflow", a.wf.BizKey)
		}
	}
	require.Len(t, byKey, 4)
	require.Equal(t, n-n/6+4, created)
	// Four tasks (three steps, a compensation), one history row and one
	// event each; a workflow row, three step rows and three edges.
	after, afterWF := f.rowCounts(t), f.workflowCount(t)
	for i := range after {
		require.Equal(t, tasksBefore[i]+4*created, after[i])
	}
	require.Equal(t, [3]int{wfBefore[0] + created, wfBefore[1] + 3*created, wfBefore[2] + 3*created}, afterWF)
}

// A step whose type and biz_key are taken fails its group's transaction;
// the group then goes one by one, so only that workflow is refused, and
// two workflows of one group holding the same key are created once.
func TestWorkflowGroupWithATakenStepFailsOnlyThatWorkflow(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	taken := f.submitWorkflow(t, `{"name":"first","steps":[{"key":"a","type":"ax.noop","biz_key":"pay-1"}]}`)
	req := func(name, bizKey, stepKey string) contracts.WorkflowRequest {
		st := contracts.WorkflowStep{Key: "a", StepTask: contracts.StepTask{Type: "ax.noop"}}
		if stepKey != "" {
			st.BizKey = stepKey
		}
		return contracts.WorkflowRequest{Name: name, BizKey: bizKey, Steps: []contracts.WorkflowStep{st,
			{Key: "b", StepTask: contracts.StepTask{Type: "ax.noop"}, DependsOn: []string{"a"}}}}
	}
	before, beforeWF := f.rowCounts(t), f.workflowCount(t)
	res, errs := f.sub.CommitWorkflowsTogether(ctx, []contracts.WorkflowRequest{
		req("ok", "", ""), req("taken", "", "pay-1"), req("twin", "t-1", ""), req("twin", "t-1", ""),
	})
	require.NoError(t, errs[0])
	var stepTaken *store.StepTakenError
	require.True(t, errors.As(errs[1], &stepTaken), "got %v", errs[1])
	require.Equal(t, stepIDs(t, taken)["a"], stepTaken.TaskID)
	require.NoError(t, errs[2])
	require.NoError(t, errs[3])
	require.False(t, res[2].Deduplicated)
	require.True(t, res[3].Deduplicated)
	require.Equal(t, res[2].Workflow.ID, res[3].Workflow.ID)
	after, afterWF := f.rowCounts(t), f.workflowCount(t)
	for i := range after {
		require.Equal(t, before[i]+4, after[i], "two workflows of two steps")
	}
	// Without compensations, their steps are listed on their rows.
	require.Equal(t, [3]int{beforeWF[0] + 2, beforeWF[1], beforeWF[2] + 2}, afterWF)

	// Together in a group that commits, the twins are one workflow too.
	res, errs = f.sub.CommitWorkflowsTogether(ctx, []contracts.WorkflowRequest{req("twin", "t-2", ""), req("ok", "", ""), req("twin", "t-2", "")})
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.True(t, res[2].Deduplicated)
	require.Equal(t, res[0].Workflow.ID, res[2].Workflow.ID)
	require.Equal(t, f.workflow(t, fmt.Sprint(res[0].Workflow.ID)), res[2].Workflow.API())
}
