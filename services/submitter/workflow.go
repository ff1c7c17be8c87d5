package submitter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/tracing"
)

// workflowBodyLimit bounds a workflow's body, like a batch's.
const workflowBodyLimit = batchBodyLimit

// maxStepKeyLen bounds a step key and a workflow name.
const maxStepKeyLen = 128

// workflowRoutes mounts the workflow and lineage API.
func (s *Submitter) workflowRoutes(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/workflows", s.handleWorkflowCreate)
	mux.HandleFunc("GET /v1/workflows", s.handleListWorkflows)
	mux.HandleFunc("GET /v1/workflows/{id}", s.handleWorkflowGet)
	mux.HandleFunc("POST /v1/workflows/{id}/cancel", s.handleWorkflowCancel)
	mux.HandleFunc("GET /v1/tasks/{id}/lineage", s.handleTaskLineage)
	mux.HandleFunc("GET /v1/lineage", s.handleBizKeyLineage)
}

// handleWorkflowCreate validates a whole workflow (every step as POST
// /v1/tasks would, the keys, the conditions and the graph) before writing
// anything, then creates it in one transaction (shared with the workflows
// created meanwhile: createWorkflow).
func (s *Submitter) handleWorkflowCreate(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > workflowBodyLimit {
		writeProblem(w, http.StatusRequestEntityTooLarge, contracts.CodePayloadTooLarge,
			fmt.Sprintf("request body of %d bytes exceeds the limit of %d bytes", r.ContentLength, workflowBodyLimit))
		return
	}
	data, p := readBody(w, r, workflowBodyLimit)
	var req contracts.WorkflowRequest
	if p == nil {
		p = decodeSubmission(data, &req)
	}
	if p != nil {
		writeProblem(w, p.Status, p.Code, p.Detail)
		return
	}
	nw, deps, p := s.validateWorkflow(r.Context(), &req)
	if p != nil {
		writeProblem(w, p.Status, p.Code, p.Detail)
		return
	}
	span := startWorkflow(r.Context(), r.Header.Get(tracing.Header), nw)
	res, err := s.createWorkflow(r.Context(), nw, deps)
	endWorkflow(span, res.Workflow, err)
	var taken *store.StepTakenError
	switch {
	case errors.As(err, &taken):
		writeProblem(w, http.StatusConflict, contracts.CodeConflict, taken.Error())
		return
	case err != nil:
		s.internal(w, "create workflow", err)
		return
	}
	out := res.Workflow.API()
	status := http.StatusCreated
	if res.Deduplicated {
		out.Deduplicated, status = true, http.StatusOK
	}
	writeJSON(w, status, out)
}

// validateWorkflow checks the request and returns the workflow to create,
// steps in topological order, and deps[i], the keys of step i's parents:
// IDs are given later (assignWorkflowIDs), afresh on every attempt.
func (s *Submitter) validateWorkflow(ctx context.Context, req *contracts.WorkflowRequest) (*store.NewWorkflow, [][]string, *contracts.Problem) {
	bad := func(format string, args ...any) (*store.NewWorkflow, [][]string, *contracts.Problem) {
		return nil, nil, contracts.NewProblem(http.StatusBadRequest, contracts.CodeInvalidArgument, fmt.Sprintf(format, args...))
	}
	switch {
	case req.Name == "" || len(req.Name) > maxStepKeyLen:
		return bad("name is required, at most %d bytes", maxStepKeyLen)
	case len(req.BizKey) > contracts.MaxBizKeyLen:
		return bad("biz_key is %d bytes, more than %d", len(req.BizKey), contracts.MaxBizKeyLen)
	case len(req.Steps) == 0 || len(req.Steps) > contracts.MaxWorkflowSteps:
		return bad("steps holds %d steps: send between 1 and %d", len(req.Steps), contracts.MaxWorkflowSteps)
	}
	order, detail := orderSteps(req.Steps)
	if detail != "" {
		return bad("%s", detail)
	}
	nw := &store.NewWorkflow{Name: req.Name}
	var deps [][]string
	if req.BizKey != "" {
		k := req.BizKey
		nw.BizKey = &k
	}
	for _, i := range order {
		st := req.Steps[i]
		nt, p := s.validateStepTask(ctx, st.Key, st.StepTask)
		if p != nil {
			return nil, nil, p
		}
		step := store.NewWorkflowStep{Key: st.Key, Task: nt}
		if len(st.DependsOn) > 0 {
			when, _ := contracts.ParseCondition(st.When)
			step.Task.Status, step.Task.Route = contracts.StatusSuspend, events.RouteTimer
			step.Task.Reason = "waiting for " + strings.Join(st.DependsOn, ", ")
			for range st.DependsOn {
				step.Task.Parents = append(step.Task.Parents, store.Dependency{When: when})
			}
		}
		if st.Compensate != nil {
			c, p := s.validateStepTask(ctx, st.Key+".compensate", *st.Compensate)
			if p != nil {
				return nil, nil, p
			}
			c.Status, c.Route, c.Reason = contracts.StatusSuspend, events.RouteTimer, "compensation of step "+st.Key+", started only if needed"
			step.Compensation = &c
		}
		nw.Steps = append(nw.Steps, step)
		deps = append(deps, st.DependsOn)
	}
	return nw, deps, nil
}

// validateStepTask validates a step's task as POST /v1/tasks validates a
// submission, naming the step in the problem.
func (s *Submitter) validateStepTask(ctx context.Context, key string, t contracts.StepTask) (store.NewTask, *contracts.Problem) {
	req := t.Submit()
	nt, p := s.validate(ctx, &req)
	if p != nil {
		p = contracts.NewProblem(p.Status, p.Code, fmt.Sprintf("step %q: %s", key, p.Detail))
	}
	return nt, p
}

// orderSteps checks the step keys and their dependencies and returns the
// steps' indexes in a topological order (ties kept in input order), or
// why there is none.
func orderSteps(steps []contracts.WorkflowStep) ([]int, string) {
	index := make(map[string]int, len(steps))
	for i, st := range steps {
		switch {
		case st.Key == "" || len(st.Key) > maxStepKeyLen:
			return nil, fmt.Sprintf("step %d: key is required, at most %d bytes", i, maxStepKeyLen)
		case index[st.Key] != 0:
			return nil, fmt.Sprintf("step key %q is used twice", st.Key)
		}
		index[st.Key] = i + 1
	}
	children := make([][]int, len(steps))
	indeg := make([]int, len(steps))
	for i, st := range steps {
		if _, err := contracts.ParseCondition(st.When); err != nil {
			return nil, fmt.Sprintf("step %q: %v", st.Key, err)
		}
		if st.When != "" && len(st.DependsOn) == 0 {
			return nil, fmt.Sprintf("step %q: when is set but depends_on is empty", st.Key)
		}
		for j, dep := range st.DependsOn {
			p := index[dep] - 1
			switch {
			case dep == st.Key:
				return nil, fmt.Sprintf("step %q depends on itself", st.Key)
			case p < 0:
				return nil, fmt.Sprintf("step %q depends on unknown step %q", st.Key, dep)
			case slices.Contains(st.DependsOn[:j], dep):
				return nil, fmt.Sprintf("step %q lists %q twice in depends_on", st.Key, dep)
			}
			children[p] = append(children[p], i)
			indeg[i]++
		}
	}
	var order, ready []int
	for i := range steps {
		if indeg[i] == 0 {
			ready = append(ready, i)
		}
	}
	for len(ready) > 0 {
		slices.Sort(ready)
		i := ready[0]
		ready = ready[1:]
		order = append(order, i)
		for _, c := range children[i] {
			if indeg[c]--; indeg[c] == 0 {
				ready = append(ready, c)
			}
		}
	}
	if len(order) < len(steps) {
		return nil, "the steps form a cycle: " + findCycle(steps, index, indeg)
	}
	return order, ""
}

// findCycle names one cycle among the steps left with parents by the
// topological sort: walking from any of them to a parent that is also
// left must come back to a step already seen.
func findCycle(steps []contracts.WorkflowStep, index map[string]int, indeg []int) string {
	start := slices.IndexFunc(indeg, func(d int) bool { return d > 0 })
	seen := map[int]int{}
	var path []int
	for i := start; ; {
		if at, ok := seen[i]; ok {
			loop := slices.Clone(path[at:])
			// Walked child to parent: reversed, it reads in run order,
			// and it starts at the step given first.
			slices.Reverse(loop)
			first := slices.Index(loop, slices.Min(loop))
			loop = append(loop[first:], loop[:first]...)
			names := make([]string, 0, len(loop)+1)
			for _, k := range loop {
				names = append(names, steps[k].Key)
			}
			return strings.Join(append(names, names[0]), " -> ")
		}
		seen[i] = len(path)
		path = append(path, i)
		for _, dep := range steps[i].DependsOn {
			if p := index[dep] - 1; indeg[p] > 0 {
				i = p
				break
			}
		}
	}
}

// assignWorkflowIDs gives the workflow, its steps (ascending in their
// topological order) and its compensations (ascending from the last step
// back) fresh snowflakes, so that a parent's ID is always below its
// children's, and links each step to its parents' IDs.
func (s *Submitter) assignWorkflowIDs(nw *store.NewWorkflow, deps [][]string) {
	nw.ID = s.ids.Next()
	ids := make(map[string]int64, len(nw.Steps))
	for i := range nw.Steps {
		st := &nw.Steps[i]
		st.Task.ID = s.ids.Next()
		ids[st.Key] = st.Task.ID
		for j, key := range deps[i] {
			st.Task.Parents[j].ParentID = ids[key]
		}
	}
	for i := len(nw.Steps) - 1; i >= 0; i-- {
		if c := nw.Steps[i].Compensation; c != nil {
			c.ID = s.ids.Next()
		}
	}
}

func (s *Submitter) workflowID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	raw := r.PathValue("id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		writeProblem(w, http.StatusNotFound, contracts.CodeNotFound, fmt.Sprintf("no workflow with id %q: workflow IDs are positive integers", raw))
		return 0, false
	}
	return id, true
}

func (s *Submitter) handleWorkflowGet(w http.ResponseWriter, r *http.Request) {
	id, ok := s.workflowID(w, r)
	if !ok {
		return
	}
	wf, err := s.store.GetWorkflow(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		writeProblem(w, http.StatusNotFound, contracts.CodeNotFound, fmt.Sprintf("no workflow with id %d", id))
		return
	}
	if err != nil {
		s.internal(w, "get workflow", err)
		return
	}
	writeJSON(w, http.StatusOK, wf.API())
}

func (s *Submitter) handleWorkflowCancel(w http.ResponseWriter, r *http.Request) {
	id, ok := s.workflowID(w, r)
	if !ok {
		return
	}
	wf, err := s.store.CancelWorkflow(r.Context(), id, s.actor(r.Context()))
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeProblem(w, http.StatusNotFound, contracts.CodeNotFound, fmt.Sprintf("no workflow with id %d", id))
	case errors.Is(err, store.ErrWorkflowFinal):
		writeProblem(w, http.StatusConflict, contracts.CodeIllegalTransition, err.Error())
	case err != nil:
		s.internal(w, "cancel workflow", err)
	default:
		writeJSON(w, http.StatusOK, wf.API())
	}
}

func (s *Submitter) handleTaskLineage(w http.ResponseWriter, r *http.Request) {
	id, ok := s.taskID(w, r)
	if !ok {
		return
	}
	l, err := s.store.TaskLineage(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		writeProblem(w, http.StatusNotFound, contracts.CodeNotFound, fmt.Sprintf("no task with id %d", id))
		return
	}
	if err != nil {
		s.internal(w, "task lineage", err)
		return
	}
	writeJSON(w, http.StatusOK, l)
}

func (s *Submitter) handleBizKeyLineage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	key, typ := q.Get("biz_key"), q.Get("type")
	if key == "" || len(key) > contracts.MaxBizKeyLen {
		writeProblem(w, http.StatusBadRequest, contracts.CodeInvalidArgument,
			fmt.Sprintf("biz_key is required, at most %d bytes", contracts.MaxBizKeyLen))
		return
	}
	ls, err := s.store.BizKeyLineages(r.Context(), key, typ)
	if err != nil {
		s.internal(w, "lineage", err)
		return
	}
	writeJSON(w, http.StatusOK, contracts.LineageList{BizKey: key, Lineages: ls})
}
