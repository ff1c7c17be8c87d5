package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/axsched/ax/contracts"
)

// chains submits two-step workflows (ax.bench, then ax.bench depending on
// it) Rate a second for Duration and measures, per chain, the release
// latency (the parent handler's end to the child handler's start: the
// parent's outcome, the release in its transaction, the relay, the
// dispatch and the claim) and the whole chain (submission to the child's
// end), then how many chains a second completed. Last it times the
// lineage answer of a 1,000-step workflow.
func (r *run) chains(ctx context.Context) ([]Metric, error) {
	children := map[int64]int64{} // parent -> child
	var mu sync.Mutex
	r.startCosts()
	out, elapsed := r.openLoopOf(ctx, func(ctx context.Context) (int64, int64, error) {
		wf, err := r.api.CreateWorkflow(ctx, contracts.WorkflowRequest{Name: "bench-chain", Steps: []contracts.WorkflowStep{
			{Key: "a", StepTask: contracts.StepTask{Type: TypeBench}}, {Key: "b", StepTask: contracts.StepTask{Type: TypeBench}, DependsOn: []string{"a"}},
		}})
		if err != nil {
			return 0, 0, err
		}
		if len(wf.Steps) != 2 {
			return 0, 0, fmt.Errorf("workflow %s has %d steps", wf.ID, len(wf.Steps))
		}
		a, err := strconv.ParseInt(wf.Steps[0].TaskID, 10, 64)
		if err != nil {
			return 0, 0, err
		}
		b, err := strconv.ParseInt(wf.Steps[1].TaskID, 10, 64)
		mu.Lock()
		children[a] = b
		mu.Unlock()
		return a, 0, err
	})
	var ids []int64
	failed := 0
	for _, s := range out {
		if s.failed {
			failed++
			continue
		}
		ids = append(ids, s.id, children[s.id])
	}
	r.logger.Info("open loop done; waiting for the chains", "chains", len(ids)/2, "failed", failed)
	werr := r.col.wait(ctx, ids, r.cfg.StallTimeout)
	costs := r.meter.stop(len(ids))
	var release, commit, chain []float64
	var childIDs []int64
	var firstNs, lastNs int64
	for _, s := range out {
		if s.failed {
			continue
		}
		p, c := r.col.runsOf(s.id), r.col.runsOf(children[s.id])
		if !p.hasSucc || !c.hasSucc {
			continue
		}
		release = append(release, ms(c.first.StartNs-p.success.EndNs))
		childIDs = append(childIDs, children[s.id])
		if c.first.CommittedNs > 0 {
			commit = append(commit, ms(max(c.first.CommittedNs-p.success.EndNs, 0)))
		}
		chain = append(chain, ms(c.success.EndNs-s.startNs))
		firstNs = minNonZero(firstNs, s.startNs)
		lastNs = max(lastNs, c.success.EndNs)
	}
	figures := latencyMetrics(mRelease, release, 50, 99)
	figures = append(figures, latencyMetrics(mReleaseCommit, commit, 50, 99)...)
	figures = append(figures, latencyMetrics(mChain, chain, 50, 99)...)
	figures = append(figures,
		Metric{Name: mChainsPerS, Value: rate(len(chain), time.Duration(lastNs-firstNs))},
		Metric{Name: mAchieved, Value: rate(len(ids)/2, elapsed)},
		Metric{Name: mSubmitErrors, Value: float64(failed)})
	hops, herr := r.hopMetrics(ctx, childIDs)
	if herr != nil {
		r.logger.Warn("per-hop latency of the children incomplete", "err", herr)
	}
	figures = append(figures, hops...)
	lineage, lerr := r.lineageOf1000(ctx)
	figures = append(figures, latencyMetrics(mLineage, lineage, 50)...)
	t := r.col.tally(ids)
	if werr == nil {
		werr = lerr
	}
	return join(figures, t.metrics(len(ids), r.col.dropped()), costs), werr
}

// lineageOf1000 creates a workflow of a root due in an hour and 999
// children, asks for its lineage a few times, timing each answer, and
// cancels it.
func (r *run) lineageOf1000(ctx context.Context) ([]float64, error) {
	steps := make([]contracts.WorkflowStep, contracts.MaxWorkflowSteps)
	steps[0] = contracts.WorkflowStep{Key: "root", StepTask: contracts.StepTask{Type: TypeBench, Delay: "1h"}}
	for i := 1; i < len(steps); i++ {
		steps[i] = contracts.WorkflowStep{Key: "s" + strconv.Itoa(i), StepTask: contracts.StepTask{Type: TypeBench}, DependsOn: []string{"root"}}
	}
	wf, err := r.api.CreateWorkflow(ctx, contracts.WorkflowRequest{Name: "bench-lineage", Steps: steps})
	if err != nil {
		return nil, fmt.Errorf("create the 1,000-step workflow: %w", err)
	}
	defer func() { _, _ = r.api.CancelWorkflow(context.WithoutCancel(ctx), wf.ID) }()
	var out []float64
	for range 7 {
		start := time.Now()
		l, err := r.api.TaskLineage(ctx, wf.Steps[len(wf.Steps)-1].TaskID)
		if err != nil {
			return out, fmt.Errorf("lineage: %w", err)
		}
		if len(l.Tasks) != contracts.MaxWorkflowSteps {
			return out, fmt.Errorf("lineage has %d tasks, want %d", len(l.Tasks), contracts.MaxWorkflowSteps)
		}
		out = append(out, ms(int64(time.Since(start))))
	}
	return out, nil
}
