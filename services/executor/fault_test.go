package executor

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/dispatch"
	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// faultRig is what the fault tests share: MySQL, a NATS server of the
// test's own, and the Redis the executors under test use.
type faultRig struct {
	st    *store.Store
	url   string
	addr  string
	keys  keys.Keys
	typ   string
	typTO time.Duration
	// direct makes the executors dispatch what their outcomes release
	// (DispatchWith), with a dispatch rule of their own.
	direct bool
	// routerIdle, with direct, leaves that rule's router without its
	// refresh loop: it knows only what the executor makes it read.
	routerIdle bool
	// beforeRecord is the executors' beforeRecord hook.
	beforeRecord func()
	// beforeRead is the executors' beforeRead hook.
	beforeRead func([]int64)
	// dropReleases, with direct, drops the release dispatches it says so
	// for (dispatch.Queue.DropWith).
	dropReleases func([]dispatch.Task) bool
	// dropHere, with direct, drops the released children an executor
	// would take up itself that it says so for (Executor.dropHere).
	dropHere func([]dispatch.Task) bool
	// window, when set, overrides the executors' fused-claim window past
	// the bound Config takes (ClaimAfterMax), so a handler can be held
	// inside it for as long as a test needs.
	window time.Duration
}

// executor starts an executor on node with its own Redis client and NATS
// connection (a process of its own, as far as the others can tell), and
// returns it with a function that kills it: its connections are cut with
// no goodbye, so it stops heartbeating, holds its leases and leaves its
// fetched messages unacknowledged, as a process killed with SIGKILL does.
func (g *faultRig) executor(t *testing.T, node string, cfg Config, h Handler, hook func(context.Context, []int64) error) (*Executor, func()) {
	t.Helper()
	e, kill, _ := g.start(t, node, cfg, h, hook)
	return e, kill
}

// start is executor, also returning a function that stops the executor as
// SIGTERM does and returns what its Run returned.
func (g *faultRig) start(t *testing.T, node string, cfg Config, h Handler, hook func(context.Context, []int64) error) (*Executor, func(), func() error) {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: g.addr})
	conn, err := bus.Connect(context.Background(), g.url, node)
	require.NoError(t, err)
	cfg.Node = node
	e, err := New(cfg, g.st, rdb, g.keys, conn, clock.System{}, testenv.Logger(t),
		[]TypeSpec{{Name: g.typ, Handler: h, Concurrency: 4, Timeout: g.typTO}})
	require.NoError(t, err)
	e.afterLease = hook
	e.beforeRecord = g.beforeRecord
	e.beforeRead = g.beforeRead
	if g.window != 0 {
		e.cfg.ClaimAfter = g.window
	}
	ctx, stop := context.WithCancel(context.Background())
	if g.direct {
		send := dispatch.New(dispatch.Config{Heartbeat: time.Second}, g.st, rdb, g.keys, clock.System{}, testenv.Logger(t))
		if !g.routerIdle {
			go func() { _ = send.Run(ctx) }()
		}
		e.DispatchWith(send, conn)
		if g.dropReleases != nil {
			e.direct.DropWith(g.dropReleases)
		}
		e.dropHere = g.dropHere
	}
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	select {
	case <-e.Ready():
	case err := <-done:
		t.Fatalf("executor %s stopped: %v", node, err)
	case <-time.After(20 * time.Second):
		t.Fatalf("executor %s not ready", node)
	}
	killed := false
	kill := func() {
		if !killed {
			killed = true
			conn.NC.Close()
			_ = rdb.Close()
		}
	}
	var stopped error
	finished := false
	wait := func() {
		if finished {
			return
		}
		select {
		case stopped = <-done:
			finished = true
		case <-time.After(30 * time.Second):
			t.Logf("executor %s did not return after it was stopped", node)
		}
	}
	t.Cleanup(func() {
		kill()
		stop()
		wait()
	})
	return e, kill, func() error {
		stop()
		wait()
		return stopped
	}
}

// dispatch stores READY task id and sends its lean dispatch to the type's
// shared normal lane, as a dispatcher would.
func (g *faultRig) dispatch(t *testing.T, id int64) {
	t.Helper()
	now := g.ready(t, id)
	data, err := events.Encode(events.TaskDispatched{TaskID: id, Type: g.typ, NextRunTimeMs: now, Load: true})
	require.NoError(t, err)
	g.publishMsgs(t, bus.Msg{Subject: events.ExecSubject(g.typ, contracts.PriorityNormal, events.SharedToken),
		EventType: events.TypeTaskDispatched, CorrelationID: strconv.FormatInt(id, 10), Data: data})
}

// ready stores READY task id, due now, and returns its due time.
func (g *faultRig) ready(t *testing.T, id int64) int64 {
	t.Helper()
	now := time.Now().UnixMilli()
	_, _, err := g.st.CreateTask(context.Background(), store.NewTask{ID: id, Type: g.typ, Priority: contracts.PriorityNormal,
		Status: contracts.StatusReady, NextRunTimeMs: now, MaxRetries: 3, TimeoutMs: g.typTO.Milliseconds(),
		Reason: "test", Route: events.RouteDispatched})
	require.NoError(t, err)
	return now
}

// publishMsgs publishes msgs over a connection of its own, as a
// dispatcher in another process would.
func (g *faultRig) publishMsgs(t *testing.T, msgs ...bus.Msg) {
	t.Helper()
	ctx := context.Background()
	pub, err := bus.Connect(ctx, g.url, "test-dispatcher")
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, bus.PublishBatch(ctx, pub.JS, msgs))
}

// history returns task id's states in order, joined by ">".
func (g *faultRig) history(t *testing.T, id int64) string {
	t.Helper()
	h, err := g.st.History(context.Background(), id)
	require.NoError(t, err)
	seq := ""
	for i, row := range h {
		if i > 0 {
			seq += ">"
		}
		seq += string(row.To)
	}
	return seq
}

func newFaultRig(t *testing.T, redisAddr string, k keys.Keys, typ string) *faultRig {
	t.Helper()
	st, _ := testenv.Store(t)
	srv, _ := testenv.NATSServer(t)
	g := &faultRig{st: st, url: srv.URL(), addr: redisAddr, keys: k, typ: typ, typTO: 10 * time.Minute}
	require.NoError(t, st.RegisterType(context.Background(), store.TaskType{Name: typ,
		TimeoutMs: g.typTO.Milliseconds(), MaxRetries: 3, Priority: contracts.PriorityNormal}))
	return g
}

var errKilled = errors.New("killed between its lease and its claim")

// An executor killed after it took a task's lease but before its READY ->
// RUNNING transfer committed leaves a lease on a READY task, as long as the
// type's timeout (10 minutes here). MySQL says nobody runs the task, and
// the registry says the lease's holder is dead: the next claim takes the
// lease over and runs the task once the holder misses its heartbeats, not
// when the lease expires.
func TestLeaseOfAClaimantKilledBeforeItsClaimDoesNotHoldTheTask(t *testing.T) {
	_, k := testenv.Redis(t)
	g := newFaultRig(t, "127.0.0.1:6379", k, "test.claimfault")
	leased := make(chan []int64, 1)
	never := make(chan struct{})
	defer close(never)
	hook := func(ctx context.Context, ids []int64) error {
		leased <- ids
		<-never // the process is dead: this claim never commits
		return errKilled
	}
	noop := HandlerFunc(func(context.Context, *Task) error { return nil })
	_, kill := g.executor(t, "victim", Config{}, noop, hook)

	g.dispatch(t, 1)
	select {
	case ids := <-leased:
		require.Equal(t, []int64{1}, ids)
	case <-time.After(20 * time.Second):
		t.Fatal("the victim did not take the lease")
	}
	rdb := redis.NewClient(&redis.Options{Addr: g.addr})
	defer rdb.Close()
	require.Equal(t, "victim:1", rdb.Get(context.Background(), k.Lock(1)).Val())
	kill()
	killed := time.Now()
	g.executor(t, "survivor", Config{}, noop, nil)

	testenv.Eventually(t, 60*time.Second, "the task SUCCESS on the survivor", func() bool {
		task, err := g.st.GetTask(context.Background(), 1)
		require.NoError(t, err)
		return task.Status == contracts.StatusSuccess
	})
	t.Logf("task ran %s after its claimant was killed (type timeout %s)", time.Since(killed).Round(100*time.Millisecond), g.typTO)
	task, err := g.st.GetTask(context.Background(), 1)
	require.NoError(t, err)
	require.Equal(t, 1, task.Attempt)
	require.Equal(t, "survivor", task.ExecutorAddr)
	require.Equal(t, "READY>RUNNING>SUCCESS", g.history(t, 1))
}

// A lease planted on a READY task by a node that is not in the registry
// (dead and forgotten, or never joined), or left by an older attempt, does
// not hold the task: MySQL says nobody runs it, so the first claim takes
// the lease over.
func TestLeaseOfANodeGoneOrAnOlderAttemptIsTakenOver(t *testing.T) {
	rdb, k := testenv.Redis(t)
	g := newFaultRig(t, "127.0.0.1:6379", k, "test.planted")
	ctx := context.Background()
	ran := make(chan int64, 2)
	g.executor(t, "live", Config{}, HandlerFunc(func(_ context.Context, task *Task) error {
		ran <- task.ID
		return nil
	}), nil)
	require.NoError(t, rdb.Set(ctx, k.Lock(1), "gone:1", g.typTO).Err())
	require.NoError(t, rdb.Set(ctx, k.Lock(2), "live:0", g.typTO).Err()) // an older attempt's leftover
	g.dispatch(t, 1)
	g.dispatch(t, 2)
	got := map[int64]bool{}
	for range 2 {
		select {
		case id := <-ran:
			got[id] = true
		case <-time.After(30 * time.Second):
			t.Fatalf("ran only %v; the planted leases held the others", got)
		}
	}
	for _, id := range []int64{1, 2} {
		testenv.Eventually(t, 10*time.Second, "history recorded", func() bool {
			return g.history(t, id) == "READY>RUNNING>SUCCESS"
		})
	}
}

// blocking is a handler that reports each task it starts and returns when
// release is closed.
func blocking(started chan<- int64, release <-chan struct{}) Handler {
	return HandlerFunc(func(_ context.Context, task *Task) error {
		started <- task.ID
		<-release
		return nil
	})
}

// Redis losing everything (FLUSHALL) under a running task takes its lease
// away, not its ownership: MySQL still says RUNNING at this attempt (or,
// inside the fused-claim window, READY at the attempt before), so the
// watchdog takes the lease again and the handler carries on. The task ends
// SUCCESS at attempt 1, with no FAILED row and no retry spent.
func TestRedisLossDoesNotCancelARunningTask(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window time.Duration
		before contracts.Status // the task's state while the handler runs
	}{
		{"claimed", 0, contracts.StatusRunning},
		{"inside the window", time.Minute, contracts.StatusReady},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := testenv.StartRedis(t)
			g := newFaultRig(t, srv.Addr, keys.New("ax"), "test.flush")
			g.window = tc.window
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
			defer rdb.Close()
			ctx := context.Background()
			started := make(chan int64, 1)
			release := make(chan struct{})
			g.executor(t, "keeper", Config{RenewInterval: 100 * time.Millisecond}, blocking(started, release), nil)
			g.dispatch(t, 1)
			select {
			case <-started:
			case <-time.After(20 * time.Second):
				t.Fatal("the task did not start")
			}
			g.awaitStatus(t, 1, tc.before)
			require.Equal(t, "keeper:1", rdb.Get(ctx, g.keys.Lock(1)).Val())
			require.NoError(t, rdb.FlushAll(ctx).Err())
			testenv.Eventually(t, 10*time.Second, "the lease taken again", func() bool {
				return rdb.Get(ctx, g.keys.Lock(1)).Val() == "keeper:1"
			})
			require.Equal(t, string(tc.before), g.history(t, 1)[strings.LastIndex(g.history(t, 1), ">")+1:])
			close(release)
			g.awaitStatus(t, 1, contracts.StatusSuccess)
			task, err := g.st.GetTask(ctx, 1)
			require.NoError(t, err)
			require.Equal(t, 1, task.Attempt)
			require.Equal(t, "READY>RUNNING>SUCCESS", g.history(t, 1))
		})
	}
}

// awaitStatus waits for task id to be in state want: a handler started
// inside the fused-claim window runs while its task is still READY, and
// is RUNNING once the window ended and its claim committed.
func (g *faultRig) awaitStatus(t *testing.T, id int64, want contracts.Status) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, "task "+string(want), func() bool {
		task, err := g.st.GetTask(context.Background(), id)
		require.NoError(t, err)
		return task.Status == want
	})
}

// A type's cluster-wide running set is rebuilt from MySQL's RUNNING rows
// when Redis lost it: with a limit of 1 and one task RUNNING, a task
// dispatched after a FLUSHALL waits, READY in its lane, rather than start
// beside it, and starts at its first attempt once the first one ends.
func TestRedisLossKeepsTheClusterLimit(t *testing.T) {
	srv := testenv.StartRedis(t)
	g := newFaultRig(t, srv.Addr, keys.New("ax"), "test.limitflush")
	ctx := context.Background()
	_, err := g.st.UpdateType(ctx, g.typ, "test", func(tt *store.TaskType) error {
		tt.Concurrency = 1
		return nil
	})
	require.NoError(t, err)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	started := make(chan int64, 2)
	release := make(chan struct{})
	// Renewals far apart: the limit must hold before the watchdog of the
	// running task has put its own member back.
	g.executor(t, "limited", Config{RenewInterval: time.Minute}, blocking(started, release), nil)
	g.dispatch(t, 1)
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		close(release)
		t.Fatal("the first task did not start")
	}
	require.EqualValues(t, 1, rdb.ZCard(ctx, g.keys.RunningSet(g.typ)).Val())
	require.NoError(t, rdb.FlushAll(ctx).Err())

	g.dispatch(t, 2)
	testenv.Eventually(t, 20*time.Second, "the running set rebuilt from MySQL", func() bool {
		return rdb.Exists(ctx, g.keys.RunningSetBuilt(g.typ)).Val() == 1
	})
	// Long enough for many looks at the set (every 100 ms at most).
	select {
	case id := <-started:
		close(release)
		t.Fatalf("task %d started beside the running one", id)
	case <-time.After(time.Second):
	}
	require.EqualValues(t, 1, rdb.ZCard(ctx, g.keys.RunningSet(g.typ)).Val(), "the rebuilt running set counts the RUNNING task")
	require.Equal(t, "READY", g.history(t, 2), "the waiting task stays READY in its lane")

	close(release)
	select {
	case id := <-started:
		require.EqualValues(t, 2, id)
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting task did not start once the first one ended")
	}
	testenv.Eventually(t, 10*time.Second, "both tasks SUCCESS", func() bool {
		return g.history(t, 1) == "READY>RUNNING>SUCCESS" && g.history(t, 2) == "READY>RUNNING>SUCCESS"
	})
}

// After Redis lost a running task's lease, only MySQL or another holder
// takes the task away: the handler is cancelled when MySQL no longer has
// the task RUNNING at its attempt (a reaper handed it on), or when the
// lease it would take back is another attempt's.
func TestRedisLossCancelsOnlyATaskOwnedElsewhere(t *testing.T) {
	srv := testenv.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		taken func(g *faultRig, id int64) error
		// A renewal between the transfer and the flush cancels it as no
		// longer this attempt's, one after as a lost lease.
		causes []error
	}{
		{"handed on in MySQL", func(g *faultRig, id int64) error {
			attempt := 1
			// No timer runs here, so the task stays READY.
			if _, err := g.st.Transfer(ctx, store.TransferParams{TaskID: id, From: contracts.StatusRunning,
				To: contracts.StatusReady, Attempt: &attempt, ClearExecutor: true, Reason: "test: recovered"}); err != nil {
				return err
			}
			return rdb.FlushAll(ctx).Err()
		}, []error{errLeaseLost, errCancelled}},
		{"its lease another attempt's", func(g *faultRig, id int64) error {
			// In one transaction, so the watchdog never sees the key empty.
			pipe := rdb.TxPipeline()
			pipe.FlushAll(ctx)
			pipe.Set(ctx, g.keys.Lock(id), "elsewhere:2", time.Minute)
			_, err := pipe.Exec(ctx)
			return err
		}, []error{errLeaseLost}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := newFaultRig(t, srv.Addr, keys.New("ax"), "test.owned")
			started := make(chan int64, 1)
			cause := make(chan error, 1)
			h := HandlerFunc(func(hctx context.Context, task *Task) error {
				started <- task.ID
				<-hctx.Done()
				cause <- context.Cause(hctx)
				return hctx.Err()
			})
			g.executor(t, "keeper", Config{RenewInterval: 200 * time.Millisecond}, h, nil)
			g.dispatch(t, 1)
			select {
			case <-started:
			case <-time.After(20 * time.Second):
				t.Fatal("the task did not start")
			}
			g.awaitStatus(t, 1, contracts.StatusRunning) // claimed: the window ended
			require.NoError(t, tc.taken(g, 1))
			select {
			case err := <-cause:
				require.True(t, slices.ContainsFunc(tc.causes, func(c error) bool { return errors.Is(err, c) }), "cancelled by %v", err)
			case <-time.After(20 * time.Second):
				t.Fatal("the handler was not cancelled")
			}
		})
	}
}
