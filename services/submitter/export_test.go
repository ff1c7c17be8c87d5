package submitter

import (
	"context"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/dispatch"
	"github.com/axsched/ax/services/internal/store"
)

// Coalescing reports whether Run is serving single submissions in shared
// transactions yet.
func (s *Submitter) Coalescing() bool { return s.coalescing.Load() }

// DropDirect makes the submitter drop every group of direct dispatches
// for which drop says so, instead of sending it: the window of a process
// killed between a commit and its dispatch. Call it after DispatchWith.
func (s *Submitter) DropDirect(drop func(taskIDs []int64) bool) {
	s.direct.DropWith(func(tasks []dispatch.Task) bool {
		ids := make([]int64, len(tasks))
		for i, t := range tasks {
			ids[i] = t.Dispatch.TaskID
		}
		return drop(ids)
	})
}

// CommitWorkflowsTogether validates reqs and commits them as one group,
// as Run would when they arrive together; each gets its result or error.
func (s *Submitter) CommitWorkflowsTogether(ctx context.Context, reqs []contracts.WorkflowRequest) ([]store.WorkflowResult, []error) {
	batch := make([]*workflowReq, len(reqs))
	for i := range reqs {
		nw, deps, p := s.validateWorkflow(ctx, &reqs[i])
		if p != nil {
			panic(p.Detail)
		}
		batch[i] = &workflowReq{nw: nw, deps: deps, done: make(chan struct{})}
	}
	s.commitWorkflows(batch)
	res, errs := make([]store.WorkflowResult, len(reqs)), make([]error, len(reqs))
	for i, r := range batch {
		<-r.done
		res[i], errs[i] = r.res, r.err
	}
	return res, errs
}
