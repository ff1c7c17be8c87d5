package executor

import (
	"sync"
	"sync/atomic"
	"time"
)

// runnerIdle is how long a runner waits for work before it exits.
const runnerIdle = 10 * time.Second

// runners are long-lived goroutines for runs and handlers. A goroutine
// started for each run began with a small stack and grew it — copied,
// frame by frame — on its way down to its first map write or MySQL call:
// 8 % of ax's CPU in the retry workload and 4 % in the throughput run went
// on copying stacks. A run or a handler now goes to an idle runner, whose
// stack has already grown to what a run needs, or to a new runner when
// none is idle; a runner left idle for its idle time, or once stop is
// called, exits.
type runners struct {
	idle    time.Duration
	work    chan func()
	done    chan struct{}
	stopped sync.Once
	// started counts the runners ever started, live those running now,
	// waiting those waiting for work.
	started, live, waiting atomic.Int64
}

func newRunners(idle time.Duration) *runners {
	return &runners{idle: idle, work: make(chan func()), done: make(chan struct{})}
}

// Go runs fn on an idle runner, or on a new one.
func (rs *runners) Go(fn func()) {
	select {
	case rs.work <- fn:
	default:
		rs.started.Add(1)
		rs.live.Add(1)
		go rs.loop(fn)
	}
}

// stop lets idle runners exit now; a runner busy with work exits when it
// is done. Go still works after stop, each fn on a runner of its own.
func (rs *runners) stop() { rs.stopped.Do(func() { close(rs.done) }) }

func (rs *runners) loop(fn func()) {
	defer rs.live.Add(-1)
	idle := time.NewTimer(rs.idle)
	defer idle.Stop()
	for {
		fn()
		idle.Reset(rs.idle)
		rs.waiting.Add(1)
		select {
		case fn = <-rs.work:
			rs.waiting.Add(-1)
		case <-idle.C:
			rs.waiting.Add(-1)
			return
		case <-rs.done:
			rs.waiting.Add(-1)
			return
		}
	}
}
