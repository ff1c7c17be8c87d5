package bench

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
)

// apiClient is a client whose transport keeps as many idle connections as
// the harness keeps requests in flight, so the open loop measures ax and
// not TCP handshakes.
func apiClient(base string, inFlight int) *client.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = inFlight
	tr.MaxIdleConnsPerHost = inFlight
	return client.New(base, client.WithHTTPClient(&http.Client{Timeout: time.Minute, Transport: tr}))
}

// submitBatches submits reqs through the batch endpoint, BatchSize tasks
// per call and BatchWorkers calls in flight, and returns the task IDs in
// request order. Any rejected task fails the run: a benchmark of a
// different number of tasks than asked for is not the benchmark.
func (r *run) submitBatches(ctx context.Context, reqs []contracts.SubmitRequest) ([]int64, error) {
	ids := make([]int64, len(reqs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(r.cfg.BatchWorkers)
	for off := 0; off < len(reqs); off += r.cfg.BatchSize {
		chunk := reqs[off:min(off+r.cfg.BatchSize, len(reqs))]
		g.Go(func() error {
			resp, err := r.api.SubmitBatch(gctx, contracts.BatchRequest{Tasks: chunk})
			if err != nil {
				return fmt.Errorf("submit batch of %d at %d: %w", len(chunk), off, err)
			}
			for _, res := range resp.Results {
				if res.Task == nil {
					return fmt.Errorf("task %d of the batch at %d rejected: %v", res.Index, off, res.Error)
				}
				id, err := strconv.ParseInt(res.Task.ID, 10, 64)
				if err != nil {
					return fmt.Errorf("task id %q: %w", res.Task.ID, err)
				}
				ids[off+res.Index] = id
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return ids, nil
}

// sent is one submission of the open loop.
type sent struct {
	id int64
	// startNs is when the HTTP call started; dueNs the due time the API
	// answered (scheduler clock).
	startNs, dueNs int64
	// lag is how late the call started against the schedule; call is how
	// long the API took to answer.
	lag, call time.Duration
	failed    bool
}

// openLoop submits Rate tasks a second for Duration, one per HTTP call,
// each call in its own goroutine so a slow answer never delays the next
// send (an open loop: the load does not adapt to the system). At most
// MaxInFlight calls are outstanding; beyond that sends start late, and the
// lag is reported rather than hidden.
func (r *run) openLoop(ctx context.Context, req contracts.SubmitRequest) (out []sent, elapsed time.Duration) {
	return r.openLoopOf(ctx, func(ctx context.Context) (int64, int64, error) {
		task, err := r.api.Submit(ctx, req)
		if err != nil {
			return 0, 0, err
		}
		id, err := strconv.ParseInt(task.ID, 10, 64)
		return id, task.NextRunTime.UnixNano(), err
	})
}

// openLoopOf is the open loop with any submission: submit returns the ID
// it keys the run by and the due time it was answered.
func (r *run) openLoopOf(ctx context.Context, submit func(context.Context) (id, dueNs int64, err error)) (out []sent, elapsed time.Duration) {
	total := int(float64(r.cfg.Rate) * r.cfg.Duration.Seconds())
	out = make([]sent, total)
	sem := make(chan struct{}, r.cfg.MaxInFlight)
	var wg sync.WaitGroup
	var logOnce sync.Once
	t0 := time.Now()
	n := 0
loop:
	for ; n < total; n++ {
		at := t0.Add(time.Duration(n) * time.Second / time.Duration(r.cfg.Rate))
		if d := time.Until(at); d > 0 {
			select {
			case <-ctx.Done():
				break loop
			case <-time.After(d):
			}
		}
		select {
		case <-ctx.Done():
			break loop
		case sem <- struct{}{}:
		}
		s := &out[n]
		wg.Go(func() {
			defer func() { <-sem }()
			start := time.Now()
			id, due, err := submit(ctx)
			s.startNs, s.lag, s.call = start.UnixNano(), start.Sub(at), time.Since(start)
			s.id, s.dueNs = id, due
			if err != nil {
				s.failed = true
				logOnce.Do(func() { r.logger.Warn("submission failed (counted in submit_errors)", "err", err) })
			}
		})
	}
	// The send span, not the wait for the last answers: achieved_rate says
	// whether the loop held its rate.
	elapsed = time.Since(t0)
	wg.Wait()
	return out[:n], elapsed
}
