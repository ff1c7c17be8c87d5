package submitter

import (
	"context"
	"errors"
	"time"

	"github.com/axsched/ax/services/internal/store"
)

// maxCoalesceSteps bounds the steps of the workflows that share one
// transaction (the first workflow of a group goes in whatever its size):
// a group holds its locks as briefly as a full batch submission does.
const maxCoalesceSteps = MaxBatch

// workflowReq is one workflow creation waiting for the next group commit.
type workflowReq struct {
	nw   *store.NewWorkflow
	deps [][]string
	res  store.WorkflowResult
	err  error
	done chan struct{}
}

// createWorkflow creates a validated workflow. While Run runs, creations
// that arrive together share a transaction, as single submissions do
// (create): under load a commit per few dozen workflows instead of one
// each. Before Run starts and after it ends, each has its own.
func (s *Submitter) createWorkflow(ctx context.Context, nw *store.NewWorkflow, deps [][]string) (store.WorkflowResult, error) {
	if s.coalescing.Load() {
		r := &workflowReq{nw: nw, deps: deps, done: make(chan struct{})}
		select {
		case s.workflows <- r:
			// Waiting out a commit already under way, whatever the
			// caller's context says: the workflow may be created.
			<-r.done
			return r.res, r.err
		case <-s.stopped:
		case <-ctx.Done():
			return store.WorkflowResult{}, ctx.Err()
		}
	}
	return s.createWorkflowOne(ctx, nw, deps)
}

// createWorkflowOne creates the workflow in its own transaction, with
// fresh IDs on a collision or a deadlock. Its steps due at once are the
// relay's to dispatch, unless commitWorkflows marked them its own.
func (s *Submitter) createWorkflowOne(ctx context.Context, nw *store.NewWorkflow, deps [][]string) (store.WorkflowResult, error) {
	out, err := commitRetrying(func() ([]store.WorkflowResult, error) {
		s.assignWorkflowIDs(nw, deps)
		return s.store.CreateWorkflows(ctx, []store.NewWorkflow{*nw})
	})
	if err != nil {
		return store.WorkflowResult{}, err
	}
	return out[0], nil
}

// commitWorkflows commits a group of workflow creations and answers each.
// A step whose type and biz_key are taken fails the group's transaction:
// then each workflow goes again alone, so that only its own creation fails.
func (s *Submitter) commitWorkflows(batch []*workflowReq) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	mine := make([]*store.NewWorkflow, len(batch))
	direct := false
	for i, r := range batch {
		mine[i] = r.nw
		direct = s.routeWorkflowDirect(r.nw)
	}
	res, err := commitRetrying(func() ([]store.WorkflowResult, error) {
		nws := make([]store.NewWorkflow, len(batch))
		for i, r := range batch {
			s.assignWorkflowIDs(r.nw, r.deps)
			nws[i] = *r.nw
		}
		return s.store.CreateWorkflows(ctx, nws)
	})
	if err == nil && direct {
		// Queued before the callers hear back, as a group of single
		// submissions' dispatches are (commitGroup).
		s.dispatchWorkflows(ctx, mine, res, time.Now())
	}
	var taken *store.StepTakenError
	fallback := errors.As(err, &taken) && len(batch) > 1
	for i, r := range batch {
		switch {
		case fallback:
			r.res, r.err = s.createWorkflowOne(ctx, r.nw, r.deps)
			if r.err == nil && direct {
				s.dispatchWorkflows(ctx, mine[i:i+1], []store.WorkflowResult{r.res}, time.Now())
			}
		case err != nil:
			r.err = err
		default:
			r.res = res[i]
		}
		close(r.done)
	}
}
