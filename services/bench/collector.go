package bench

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/axsched/ax/events"
)

// collector gathers the ax.bench reports of one run from core NATS.
type collector struct {
	nc     *nats.Conn
	sub    *nats.Subscription
	logger *slog.Logger

	mu        sync.Mutex
	byTask    map[int64][]events.BenchDone
	malformed int
	lastAt    time.Time // when the latest report arrived
}

// listen subscribes to events.SubjectBenchDone before anything is
// submitted. The subscription's client-side buffer is unlimited, so a
// burst is queued rather than dropped; what is dropped anyway (the server
// cutting a slow consumer) shows as missing reports and in dropped().
func listen(url string, logger *slog.Logger) (*collector, error) {
	c := &collector{byTask: map[int64][]events.BenchDone{}, logger: logger, lastAt: time.Now()}
	nc, err := nats.Connect(url, nats.Name("ax-bench"), nats.MaxReconnects(-1),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			logger.Warn("nats error on the report subscription", "err", err)
		}))
	if err != nil {
		return nil, fmt.Errorf("connect nats %s: %w", url, err)
	}
	c.nc = nc
	if c.sub, err = nc.Subscribe(events.SubjectBenchDone, c.handle); err != nil {
		nc.Close()
		return nil, fmt.Errorf("subscribe %s: %w", events.SubjectBenchDone, err)
	}
	if err := c.sub.SetPendingLimits(-1, -1); err != nil {
		nc.Close()
		return nil, fmt.Errorf("pending limits: %w", err)
	}
	// The subscription must be known to the server before the first task runs.
	if err := nc.FlushTimeout(10 * time.Second); err != nil {
		nc.Close()
		return nil, fmt.Errorf("flush subscription: %w", err)
	}
	return c, nil
}

// handle takes a message of reports: a JSON array of them, or a single
// object from an executor that predates batching.
func (c *collector) handle(m *nats.Msg) {
	var (
		rs  []events.BenchDone
		err error
	)
	if data := bytes.TrimLeft(m.Data, " \t\r\n"); len(data) > 0 && data[0] == '[' {
		err = events.Decode(data, &rs)
	} else {
		var r events.BenchDone
		err = events.Decode(m.Data, &r)
		rs = []events.BenchDone{r}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastAt = time.Now()
	if err != nil {
		c.malformed++
		return
	}
	for _, r := range rs {
		c.byTask[r.TaskID] = append(c.byTask[r.TaskID], r)
	}
}

// close unsubscribes and disconnects.
func (c *collector) close() { c.nc.Close() }

// dropped counts reports lost on the way: dropped by the client library
// and undecodable.
func (c *collector) dropped() int {
	n, _ := c.sub.Dropped()
	c.mu.Lock()
	defer c.mu.Unlock()
	return n + c.malformed
}

// wait blocks until every task in ids has a successful report. It gives up
// when no report at all arrived for stall, and says how many are missing.
//
// Each check walks ids from the first task not yet seen to succeed and
// stops at the next one still pending: all are done only when that walk
// reaches the end, and the walk over a whole run costs one lookup per task
// plus one per check. (Re-checking every pending task every 20 ms cost the
// harness about a CPU-second per 50,000 tasks, on the cores it shares with
// what it measures.)
func (c *collector) wait(ctx context.Context, ids []int64, stall time.Duration) error {
	pending := ids
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		c.mu.Lock()
		for len(pending) > 0 && c.succeeded(pending[0]) {
			pending = pending[1:]
		}
		quiet := time.Since(c.lastAt)
		c.mu.Unlock()
		if len(pending) == 0 {
			return nil
		}
		if quiet > stall {
			return fmt.Errorf("%d of %d tasks never reported success (nothing arrived for %s)", c.unfinished(pending), len(ids), stall)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d tasks not reported yet: %w", c.unfinished(pending), len(ids), ctx.Err())
		case <-tick.C:
		}
	}
}

// unfinished counts the tasks of ids without a successful report.
func (c *collector) unfinished(ids []int64) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, id := range ids {
		if !c.succeeded(id) {
			n++
		}
	}
	return n
}

// succeeded reports whether id has an OK report; c.mu is held.
func (c *collector) succeeded(id int64) bool {
	for _, r := range c.byTask[id] {
		if r.OK {
			return true
		}
	}
	return false
}

// taskRuns is what the reports say about one task.
type taskRuns struct {
	// first is the report of the earliest-starting run, success the first
	// successful one (zero values when absent).
	first, success events.BenchDone
	// failed is the latest-starting failed run.
	failed            events.BenchDone
	runs, successes   int
	hasFirst, hasSucc bool
	hasFailed         bool
}

// runsOf summarises the reports of id.
func (c *collector) runsOf(id int64) taskRuns {
	c.mu.Lock()
	defer c.mu.Unlock()
	var t taskRuns
	for _, r := range c.byTask[id] {
		t.runs++
		if !t.hasFirst || r.StartNs < t.first.StartNs {
			t.first, t.hasFirst = r, true
		}
		if r.OK {
			t.successes++
			if !t.hasSucc || r.StartNs < t.success.StartNs {
				t.success, t.hasSucc = r, true
			}
		} else if !t.hasFailed || r.StartNs > t.failed.StartNs {
			t.failed, t.hasFailed = r, true
		}
	}
	return t
}

// tally is the structural check of a run: every task reported exactly once
// successfully, nothing lost.
type tally struct {
	// lastEndNs is the latest end of a successful run.
	lastEndNs                 int64
	missing, duplicates, runs int
}

// tally checks ids against the reports.
func (c *collector) tally(ids []int64) tally {
	var t tally
	for _, id := range ids {
		r := c.runsOf(id)
		t.runs += r.runs
		switch {
		case r.successes == 0:
			t.missing++
			continue
		case r.successes > 1:
			t.duplicates += r.successes - 1
		}
		t.lastEndNs = max(t.lastEndNs, r.success.EndNs)
	}
	return t
}

// metrics are the check counters every workload reports.
func (t tally) metrics(tasks, dropped int) []Metric {
	return []Metric{{Name: mTasks, Value: float64(tasks)}, {Name: mRuns, Value: float64(t.runs)},
		{Name: mMissing, Value: float64(t.missing)}, {Name: mDuplicates, Value: float64(t.duplicates)},
		{Name: mDropped, Value: float64(dropped)}}
}
