package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// shapeStep is a step of a scenario: its key, its parents' keys and the
// condition it waits for.
type shapeStep struct {
	key     string
	parents []string
	when    contracts.Condition
}

// shapeScenario is a workflow and what happens to it, one batch of
// ends (or a cancel) at a time.
type shapeScenario struct {
	name    string
	steps   []shapeStep
	batches []shapeBatch
	// leaves is how many of its ends a workflow listed on its row counts
	// (open_steps when created): a tree counts its leaves only.
	leaves int
}

type shapeBatch struct {
	ends   map[string]contracts.Status // step key -> how it ends
	cancel bool                        // cancel the workflow instead
	// byHand cancels this step alone (as POST /v1/tasks/{id}/cancel
	// does), whatever its parents are doing.
	byHand string
}

var shapeScenarios = []shapeScenario{
	{name: "a chain that succeeds", leaves: 1,
		steps: []shapeStep{{key: "a"}, {key: "b", parents: []string{"a"}}, {key: "c", parents: []string{"b"}}},
		batches: []shapeBatch{{ends: map[string]contracts.Status{"a": contracts.StatusSuccess}},
			{ends: map[string]contracts.Status{"b": contracts.StatusSuccess}}, {ends: map[string]contracts.Status{"c": contracts.StatusSuccess}}}},
	{name: "a chain whose first step fails", leaves: 1,
		steps:   []shapeStep{{key: "charge"}, {key: "sms", parents: []string{"charge"}}},
		batches: []shapeBatch{{ends: map[string]contracts.Status{"charge": contracts.StatusFailed}}}},
	{name: "a chain whose middle step times out", leaves: 1,
		steps: []shapeStep{{key: "a"}, {key: "b", parents: []string{"a"}}, {key: "c", parents: []string{"b"}}},
		batches: []shapeBatch{{ends: map[string]contracts.Status{"a": contracts.StatusSuccess}},
			{ends: map[string]contracts.Status{"b": contracts.StatusTimeout}}}},
	{name: "a tree whose failure branch is not taken", leaves: 2,
		steps: []shapeStep{{key: "a"}, {key: "b", parents: []string{"a"}}, {key: "undo", parents: []string{"a"}, when: contracts.WhenFailure}},
		batches: []shapeBatch{{ends: map[string]contracts.Status{"a": contracts.StatusSuccess}},
			{ends: map[string]contracts.Status{"b": contracts.StatusSuccess}}}},
	{name: "a tree whose failure branch handles a failure", leaves: 2,
		steps: []shapeStep{{key: "a"}, {key: "b", parents: []string{"a"}}, {key: "undo", parents: []string{"a"}, when: contracts.WhenFailure}},
		batches: []shapeBatch{{ends: map[string]contracts.Status{"a": contracts.StatusFailed}},
			{ends: map[string]contracts.Status{"undo": contracts.StatusSuccess}}}},
	{name: "a tree that always cleans up", leaves: 2,
		steps: []shapeStep{{key: "a"}, {key: "b", parents: []string{"a"}}, {key: "c", parents: []string{"b"}},
			{key: "clean", parents: []string{"a"}, when: contracts.WhenAlways}},
		batches: []shapeBatch{{ends: map[string]contracts.Status{"a": contracts.StatusSuccess}},
			{ends: map[string]contracts.Status{"b": contracts.StatusSuccess, "clean": contracts.StatusFailed}}}},
	{name: "a chain cancelled while it runs", leaves: 1,
		steps:   []shapeStep{{key: "a"}, {key: "b", parents: []string{"a"}}},
		batches: []shapeBatch{{cancel: true}}},
	{name: "a chain whose last step is cancelled by hand first", leaves: 1,
		steps: []shapeStep{{key: "a"}, {key: "b", parents: []string{"a"}}, {key: "c", parents: []string{"b"}}},
		batches: []shapeBatch{{byHand: "c"}, {ends: map[string]contracts.Status{"a": contracts.StatusSuccess}},
			{ends: map[string]contracts.Status{"b": contracts.StatusSuccess}}}},
	{name: "a chain whose middle step is cancelled by hand", leaves: 1,
		steps:   []shapeStep{{key: "a"}, {key: "b", parents: []string{"a"}}, {key: "c", parents: []string{"b"}}},
		batches: []shapeBatch{{byHand: "b"}, {ends: map[string]contracts.Status{"a": contracts.StatusSuccess}}}},
	{name: "a tree whose leaf is cancelled by hand, then its other leaf", leaves: 2,
		steps: []shapeStep{{key: "a"}, {key: "b", parents: []string{"a"}}, {key: "c", parents: []string{"a"}}},
		batches: []shapeBatch{{byHand: "b"}, {ends: map[string]contracts.Status{"a": contracts.StatusSuccess}},
			{byHand: "c"}}},
	{name: "a diamond, which counts every step", leaves: 4,
		steps: []shapeStep{{key: "a"}, {key: "b", parents: []string{"a"}}, {key: "c", parents: []string{"a"}},
			{key: "d", parents: []string{"b", "c"}}},
		batches: []shapeBatch{{ends: map[string]contracts.Status{"a": contracts.StatusSuccess}},
			{ends: map[string]contracts.Status{"b": contracts.StatusSuccess, "c": contracts.StatusSuccess}},
			{ends: map[string]contracts.Status{"d": contracts.StatusSuccess}}}},
}

// A workflow without compensations answers alike whether its steps are
// listed on its row or in workflow_steps: its view, its list item (open
// steps counted from its tasks), its lineage, its tasks' workflow, after
// every batch of ends; and the row says what each shape stores. IDs are
// snowflake-sized, so that the JSON list keeps them whole.
func TestBothStepShapesAnswerAlike(t *testing.T) {
	ctx := context.Background()
	stores := make([]*store.Store, len(stepShapes))
	for i, sh := range stepShapes {
		stores[i] = sh.store(t)
	}
	for n, sc := range shapeScenarios {
		t.Run(sc.name, func(t *testing.T) {
			wf := int64(1)<<60 + int64(n)
			first := int64(1)<<61 + int64(n)*100
			ids := map[string]int64{}
			for i, s := range sc.steps {
				ids[s.key] = first + int64(i)
			}
			for i, st := range stores {
				createShapeWorkflow(t, st, wf, sc, ids)
				var steps sql.NullString
				var open, rows int
				require.NoError(t, st.DB().QueryRow(`SELECT steps, open_steps FROM workflows WHERE id = ?`, wf).Scan(&steps, &open))
				require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM workflow_steps WHERE workflow_id = ?`, wf).Scan(&rows))
				if stepShapes[i].inTable {
					require.False(t, steps.Valid)
					require.Equal(t, len(sc.steps), rows)
					require.Equal(t, len(sc.steps), open)
				} else {
					require.True(t, steps.Valid)
					require.Zero(t, rows)
					require.Equal(t, sc.leaves, open, "a tree counts its leaves")
				}
			}
			compareShapes(t, stores, wf, ids)
			for _, b := range sc.batches {
				for _, st := range stores {
					if b.cancel {
						_, err := st.CancelWorkflow(ctx, wf, "test")
						require.NoError(t, err)
						continue
					}
					if b.byHand != "" {
						task, err := st.GetTask(ctx, ids[b.byHand])
						require.NoError(t, err)
						_, err = st.Transfer(ctx, store.TransferParams{TaskID: task.ID, From: task.Status, To: contracts.StatusCancelled,
							Reason: "cancelled by alice", Actor: "alice"})
						require.NoError(t, err)
						continue
					}
					endSteps(t, st, b.ends, ids)
				}
				compareShapes(t, stores, wf, ids)
			}
			w, err := stores[0].GetWorkflow(ctx, wf)
			require.NoError(t, err)
			require.True(t, w.Status.Final(), "every scenario ends its workflow: %s", w.Status)
		})
	}
}

func createShapeWorkflow(t *testing.T, st *store.Store, wf int64, sc shapeScenario, ids map[string]int64) {
	t.Helper()
	var steps []store.NewWorkflowStep
	for _, s := range sc.steps {
		status := contracts.StatusReady
		if len(s.parents) > 0 {
			status = contracts.StatusSuspend
		}
		task := dagTask(ids[s.key], status)
		when := s.when
		if when == "" {
			when = contracts.WhenSuccess
		}
		for _, p := range s.parents {
			task.Parents = append(task.Parents, store.Dependency{ParentID: ids[p], When: when})
		}
		steps = append(steps, store.NewWorkflowStep{Key: s.key, Task: task})
	}
	_, _, err := st.CreateWorkflow(context.Background(), store.NewWorkflow{ID: wf, Name: "shape", Steps: steps})
	require.NoError(t, err)
}

// endSteps claims the steps of ends and ends them, in one batch.
func endSteps(t *testing.T, st *store.Store, ends map[string]contracts.Status, ids map[string]int64) {
	t.Helper()
	ctx := context.Background()
	var claims, outcomes [][]store.TransferParams
	for key, to := range ends {
		id := ids[key]
		one := 1
		claims = append(claims, []store.TransferParams{{TaskID: id, From: contracts.StatusReady, To: contracts.StatusRunning, Claim: true, Executor: "n"}})
		outcomes = append(outcomes, []store.TransferParams{{TaskID: id, From: contracts.StatusRunning, To: to, Attempt: &one, Reason: "test"}})
	}
	for _, batch := range [][][]store.TransferParams{claims, outcomes} {
		res, err := st.TransferBatch(ctx, batch)
		require.NoError(t, err)
		for _, r := range res {
			require.NoError(t, r.Err)
		}
	}
}

// shapeView is what the API shows of a workflow, without times.
type shapeView struct {
	Workflow contracts.Workflow
	Item     store.WorkflowListItem
	Lineage  []string
	Of       []int64
}

func viewShape(t *testing.T, st *store.Store, wf int64, ids map[string]int64) shapeView {
	t.Helper()
	ctx := context.Background()
	w, err := st.GetWorkflow(ctx, wf)
	require.NoError(t, err)
	v := shapeView{Workflow: w.API()}
	v.Workflow.CreatedAt, v.Workflow.UpdatedAt = time.Time{}, time.Time{}
	items, err := st.ListWorkflows(ctx, store.ListWorkflowsParams{Filter: store.WorkflowFilter{MinID: wf, MaxID: wf + 1}, Limit: 10})
	require.NoError(t, err)
	require.Len(t, items, 1)
	v.Item = items[0]
	v.Item.CreatedAt, v.Item.UpdatedAt = time.Time{}, time.Time{}
	open := 0
	for _, s := range w.Steps {
		if !slices.Contains([]contracts.Status{contracts.StatusSuccess, contracts.StatusFailed, contracts.StatusTimeout, contracts.StatusCancelled}, s.Status) {
			open++
		}
	}
	require.Equal(t, open, v.Item.OpenSteps, "the list counts the steps that have not ended")
	for _, key := range slices.Sorted(maps.Keys(ids)) {
		id := ids[key]
		l, err := st.TaskLineage(ctx, id)
		require.NoError(t, err)
		require.NotNil(t, l.Workflow)
		for _, lt := range l.Tasks {
			v.Lineage = append(v.Lineage, fmt.Sprintf("%d: %s %s %s %q", id, lt.ID, lt.StepKey, lt.Status, lt.Reason))
		}
		for _, e := range l.Edges {
			v.Lineage = append(v.Lineage, fmt.Sprintf("%d: %s -> %s %s", id, e.Parent, e.Child, e.When))
		}
		of, err := st.WorkflowOf(ctx, id)
		require.NoError(t, err)
		v.Of = append(v.Of, of)
	}
	return v
}

func compareShapes(t *testing.T, stores []*store.Store, wf int64, ids map[string]int64) {
	t.Helper()
	want := viewShape(t, stores[1], wf, ids)
	require.Equal(t, want, viewShape(t, stores[0], wf, ids))
}

// Going down past migration 0021 puts the steps listed on workflows' rows
// back in workflow_steps, keys, positions and snowflake-sized task IDs
// whole, and recounts the open steps of a running one as builds before it
// count them (every step); going up again, the workflow reads the same.
func TestMigratingDownListsStepsInTheTableAgain(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.MigratedDSN(t)
	st, err := store.Open(ctx, dsn, store.Options{Actor: "test"})
	require.NoError(t, err)
	defer st.Close()
	sc := shapeScenarios[0] // a -> b -> c
	wf, first := int64(1)<<60, int64(1)<<61
	ids := map[string]int64{"a": first, "b": first + 1, "c": first + 2}
	createShapeWorkflow(t, st, wf, sc, ids)
	endSteps(t, st, map[string]contracts.Status{"a": contracts.StatusSuccess}, ids)
	before, err := st.GetWorkflow(ctx, wf)
	require.NoError(t, err)
	var open int
	require.NoError(t, st.DB().QueryRow(`SELECT open_steps FROM workflows WHERE id = ?`, wf).Scan(&open))
	require.Equal(t, 1, open, "only its leaf counts")

	require.NoError(t, store.MigrateDownTo(ctx, dsn, 20))
	rows, err := st.DB().Query(`SELECT step_key, position, task_id, final_status IS NULL FROM workflow_steps WHERE workflow_id = ? ORDER BY position`, wf)
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var key string
		var pos int
		var task int64
		var noFinal bool
		require.NoError(t, rows.Scan(&key, &pos, &task, &noFinal))
		got = append(got, fmt.Sprintf("%s %d %d %v", key, pos, task, noFinal))
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{fmt.Sprintf("a 0 %d true", first), fmt.Sprintf("b 1 %d true", first+1), fmt.Sprintf("c 2 %d true", first+2)}, got)
	require.NoError(t, st.DB().QueryRow(`SELECT open_steps FROM workflows WHERE id = ?`, wf).Scan(&open))
	require.Equal(t, 2, open, "b and c have not ended")

	require.NoError(t, store.Migrate(ctx, dsn))
	after, err := st.GetWorkflow(ctx, wf)
	require.NoError(t, err)
	require.Equal(t, before.API(), after.API())
}
