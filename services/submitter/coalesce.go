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

// coalesce serves create until ctx ends.
func (s *Submitter) coalesce(ctx context.Context) {
	s.coalescing.Store(true)
	defer close(s.stopped)
	for {
		var batch []*createReq
		select {
		case r := <-s.creates:
			batch = append(batch, r)
		case <-ctx.Done():
			return
		}
	more:
		for len(batch) < maxCoalesce {
			select {
			case r := <-s.creates:
				batch = append(batch, r)
			default:
				break more
			}
		}
		s.commitGroup(batch)
	}
}

// commitGroup commits a group of single submissions and answers each.
func (s *Submitter) commitGroup(batch []*createReq) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var (
		res  []store.BatchResult
		err  error
		mine []bool
	)
	for range 3 {
		nts := make([]store.NewTask, len(batch))
		for i, r := range batch {
			nts[i] = r.nt
			nts[i].ID = s.ids.Next()
		}
		mine = s.routeDirect(nts)
		res, err = s.store.CreateTasks(ctx, nts)
		if !errors.Is(err, store.ErrIDTaken) && !store.IsDeadlock(err) {
			break
		}
	}
	if errors.Is(err, store.ErrIDTaken) {
		err = errIDCollisions
	}
	if err == nil {
		metrics.SubmitCommits.Inc()
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
