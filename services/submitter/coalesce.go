package submitter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
)

// maxCoalesce bounds how many single submissions share one transaction.
const maxCoalesce = 256

// createReq is one single submission waiting for the next group commit.
type createReq struct {
	nt    store.NewTask
	task  *store.Task
	dedup bool
	err   error
	done  chan struct{}
}

// create inserts one submitted task. While Run runs, submissions that
// arrive together share a transaction: whatever queued while the previous
// commit was being made goes into the next one (store.CreateTasks, which
// deduplicates by biz_key exactly as one-by-one creation does). Under load
// that turns a commit per submission into a commit per few dozen; an idle
// submitter commits each at once. Before Run starts and after it ends,
// each submission has its own transaction.
func (s *Submitter) create(ctx context.Context, nt store.NewTask) (*store.Task, bool, error) {
	if s.coalescing.Load() {
		r := &createReq{nt: nt, done: make(chan struct{})}
		select {
		case s.creates <- r:
			// Waiting out a commit already under way, whatever the
			// caller's context says: the task may be created.
			<-r.done
			return r.task, r.dedup, r.err
		case <-s.stopped:
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
	return s.createOne(ctx, nt)
}

// createOne inserts the task in its own transaction, retrying with a
// fresh ID on the rare snowflake collision between two submitters sharing
// a node ID.
func (s *Submitter) createOne(ctx context.Context, nt store.NewTask) (*store.Task, bool, error) {
	for range 3 {
		nt.ID = s.ids.Next()
		task, dedup, err := s.store.CreateTask(ctx, nt)
		if errors.Is(err, store.ErrIDTaken) {
			continue
		}
		if err == nil {
			metrics.SubmitCommits.Inc()
		}
		return task, dedup, err
	}
	return nil, false, errIDCollisions
}

var errIDCollisions = fmt.Errorf("three task ID collisions in a row: check that submitters have distinct node IDs")

// coalesce serves create and createWorkflow until ctx ends, each with a
// loop of its own: a group of tasks and a group of workflows commit side
// by side.
func (s *Submitter) coalesce(ctx context.Context) {
	s.coalescing.Store(true)
	defer close(s.stopped)
	done := make(chan struct{})
	go func() {
		defer close(done)
		serveGroups(ctx, s.workflows, maxCoalesceSteps, func(r *workflowReq) int { return len(r.nw.Steps) }, s.commitWorkflows)
	}()
	serveGroups(ctx, s.creates, maxCoalesce, func(*createReq) int { return 1 }, s.commitGroup)
	<-done
}

// serveGroups takes requests from in until ctx ends and hands commit
// whatever queued up while the previous group committed: the first
// request and the ones after it, until their weights reach limit or
// nothing more waits.
func serveGroups[T any](ctx context.Context, in <-chan T, limit int, weight func(T) int, commit func([]T)) {
	for {
		var batch []T
		select {
		case r := <-in:
			batch = append(batch, r)
		case <-ctx.Done():
			return
		}
		w := weight(batch[0])
	more:
		for w < limit {
			select {
			case r := <-in:
				batch = append(batch, r)
				w += weight(r)
			default:
				break more
			}
		}
		commit(batch)
	}
}

// commitGroup commits a group of single submissions and answers each.
func (s *Submitter) commitGroup(batch []*createReq) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var mine []bool
	res, err := commitRetrying(func() ([]store.BatchResult, error) {
		nts := make([]store.NewTask, len(batch))
		for i, r := range batch {
			nts[i] = r.nt
			nts[i].ID = s.ids.Next()
		}
		mine = s.routeDirect(nts)
		return s.store.CreateTasks(ctx, nts)
	})
	if errors.Is(err, store.ErrIDTaken) {
		err = errIDCollisions
	}
	if err == nil {
		// Queued before the callers hear back: the executor is the one
		// waiting.
		s.dispatchCommitted(ctx, mine, res, time.Now())
	}
	for i, r := range batch {
		if err != nil {
			r.err = err
		} else {
			r.task, r.dedup = res[i].Task, res[i].Deduplicated
		}
		close(r.done)
	}
}

// commitRetrying runs commit, which gives its rows fresh IDs each time,
// until it neither collides on an ID nor deadlocks, at most batchAttempts
// times, and counts the transaction that committed.
func commitRetrying[R any](commit func() (R, error)) (R, error) {
	var (
		res R
		err error
	)
	for range batchAttempts {
		res, err = commit()
		if !errors.Is(err, store.ErrIDTaken) && !store.IsDeadlock(err) {
			break
		}
	}
	if err == nil {
		metrics.SubmitCommits.Inc()
	}
	return res, err
}
