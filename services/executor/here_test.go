package executor

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/dispatch"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// awaitOwner waits until e's dispatch rule sends task id of typ to e
// itself: its routing has read the membership e joined.
func awaitOwner(t *testing.T, e *Executor, typ string, id int64) {
	t.Helper()
	testenv.Eventually(t, 10*time.Second, "the executor owns the task's shard", func() bool {
		here, _ := e.direct.Here(context.Background(), e.cfg.Node,
			[]dispatch.Task{{Lane: contracts.PriorityNormal, Dispatch: events.TaskDispatched{TaskID: id, Type: typ}}})
		return len(here) == 1
	})
}

// An executor routes to itself from the moment it is ready: once its
// first heartbeat is in the registry it has its router read it, rather
// than wait for the router's next refresh (up to a second, every child
// its outcomes released meanwhile going the long way: to the shared
// subjects, stored, fetched, its row read again). Here the router has no
// refresh loop at all: only the executor's own read can have found it.
func TestAReadyExecutorRoutesToItself(t *testing.T) {
	_, _, g := windowRig(t, "test.routeself")
	g.direct, g.routerIdle = true, true
	e, _ := g.executor(t, "self-node", Config{}, reporting(make(chan int64, 1)), nil)
	for id := int64(1); id <= 64; id++ {
		here, rest := e.direct.Here(context.Background(), e.cfg.Node,
			[]dispatch.Task{{Lane: contracts.PriorityNormal, Dispatch: events.TaskDispatched{TaskID: id, Type: g.typ}}})
		require.Len(t, here, 1, "task %d is routed elsewhere: %+v", id, rest)
	}
}

// ownSubjects subscribes, with core NATS, to the subjects of node's own
// lanes of typ: whatever is dispatched to node arrives here too.
func ownSubjects(t *testing.T, url, typ, node string) <-chan *nats.Msg {
	t.Helper()
	nc, err := nats.Connect(url)
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	ch := make(chan *nats.Msg, 64)
	for _, lane := range contracts.Priorities {
		_, err = nc.ChanSubscribe(events.ExecSubject(typ, lane, events.NodeToken(node)), ch)
		require.NoError(t, err)
	}
	require.NoError(t, nc.Flush())
	return ch
}

// The children an executor's outcomes release whose shards it owns are
// taken up where they were released: no dispatch message goes to its own
// subject and comes back, and they are not marked dispatched in Redis
// (nothing queues in JetStream for the reconciler to leave alone). They
// are released as before (SUSPEND, READY routed "dispatched", RUNNING,
// SUCCESS, each once) and counted in ax_executor_released_here_total.
func TestReleasedChildrenRunWhereTheyWereReleased(t *testing.T) {
	rdb, k, g := windowRig(t, "test.here")
	g.direct = true
	ran := make(chan int64, 3)
	const node = "here-node"
	own := ownSubjects(t, g.url, g.typ, node)
	e, _ := g.executor(t, node, Config{}, reporting(ran), nil)
	awaitOwner(t, e, g.typ, 2)
	awaitOwner(t, e, g.typ, 3)
	before := testutil.ToFloat64(metrics.ExecutorReleasedHere.WithLabelValues(g.typ))

	g.runChain(t, ran, rdb, k, false)
	require.Equal(t, 2.0, testutil.ToFloat64(metrics.ExecutorReleasedHere.WithLabelValues(g.typ))-before)
	select {
	case m := <-own:
		t.Fatalf("a dispatch went to the node's own subject %s: %s", m.Subject, m.Data)
	default:
	}
}

// Released children waiting here for a slot when the executor stops are
// handed to the dispatcher as due commands at once, as the work queued on
// a departing node's own subject is: one for each child that had not
// started, saying its type, attempt and state, so the dispatcher routes it
// without reading its row. The children that had started are handed back
// READY at the shutdown timeout, as any run is.
func TestReleasedChildrenQueuedHereAreHandedBackWhenTheExecutorStops(t *testing.T) {
	_, k := testenv.Redis(t)
	g := newFaultRig(t, "127.0.0.1:6379", k, "test.herestop")
	g.direct = true
	const node = "here-stopping"
	started := make(chan int64, 8)
	h := HandlerFunc(func(ctx context.Context, task *Task) error {
		if task.ID == 1 {
			return nil
		}
		started <- task.ID
		<-ctx.Done()
		return ctx.Err()
	})
	e, _, stop := g.start(t, node, Config{ShutdownTimeout: 300 * time.Millisecond}, h, nil)
	children := []int64{2, 3, 4, 5, 6, 7, 8, 9}
	for _, id := range children {
		awaitOwner(t, e, g.typ, id)
	}
	g.fanOut(t, 1, children...)
	g.send(t, 1, events.ExecSubject(g.typ, contracts.PriorityNormal, events.SharedToken))

	// The type's pool has four slots: four children start, four wait.
	ran := map[int64]bool{}
	for range 4 {
		ran[awaitStart(t, started)] = true
	}
	for id := range ran {
		g.awaitStatus(t, id, contracts.StatusRunning)
	}
	require.NoError(t, stop())

	conn, err := bus.Connect(context.Background(), g.url, "test-reader")
	require.NoError(t, err)
	defer conn.Close()
	var moved, waited []int64
	for _, m := range testenv.DrainWork(t, conn, events.SubjectDue) {
		var due events.TaskDue
		require.NoError(t, events.Decode(m.Data(), &due))
		require.Equal(t, events.TaskDue{TaskID: due.TaskID, Priority: contracts.PriorityNormal, NextRunTimeMs: due.NextRunTimeMs,
			Type: g.typ, Attempt: 0, Status: contracts.StatusReady}, due)
		moved = append(moved, due.TaskID)
	}
	for _, id := range children {
		if !ran[id] {
			waited = append(waited, id)
		}
		g.awaitStatus(t, id, contracts.StatusReady)
	}
	sort.Slice(moved, func(i, j int) bool { return moved[i] < moved[j] })
	require.Equal(t, waited, moved, "a due command for each child that waited here, and only for them")
}

// fanOut creates root, READY and due, and children, each SUSPEND until
// root succeeds.
func (g *faultRig) fanOut(t *testing.T, root int64, children ...int64) {
	t.Helper()
	now := time.Now().UnixMilli()
	nts := []store.NewTask{{ID: root, Type: g.typ, Priority: contracts.PriorityNormal, Status: contracts.StatusReady,
		Route: events.RouteDispatched, NextRunTimeMs: now, MaxRetries: 3, TimeoutMs: g.typTO.Milliseconds(), Reason: "test", DAG: true}}
	for _, id := range children {
		nts = append(nts, store.NewTask{ID: id, Type: g.typ, Priority: contracts.PriorityNormal, Status: contracts.StatusSuspend,
			NextRunTimeMs: now, MaxRetries: 3, TimeoutMs: g.typTO.Milliseconds(), Reason: "test", DAG: true,
			Parents: []store.Dependency{{ParentID: root, When: contracts.WhenSuccess}}})
	}
	_, err := g.st.CreateTasks(context.Background(), nts)
	require.NoError(t, err)
}

// A child taken up where it was released is claimed on what its release
// read under its row lock: its fused claim reads no row, and it runs with
// its own payload, timeout and retries all the same (a first failure,
// with five retries, is retried).
func TestAChildTakenUpHereIsClaimedOnWhatItsReleaseRead(t *testing.T) {
	_, _, g := windowRig(t, "test.hereread")
	g.direct = true
	var mu sync.Mutex
	var read []int64
	g.beforeRead = func(ids []int64) {
		mu.Lock()
		read = append(read, ids...)
		mu.Unlock()
	}
	type seen struct {
		payload string
		timeout time.Duration
	}
	runs := make(chan seen, 2)
	e, _ := g.executor(t, "here-read", Config{}, HandlerFunc(func(ctx context.Context, task *Task) error {
		deadline, _ := ctx.Deadline()
		runs <- seen{string(task.Payload), time.Until(deadline)}
		if task.ID == 2 {
			return errors.New("the child fails once")
		}
		return nil
	}), nil)
	awaitOwner(t, e, g.typ, 2)
	now := time.Now().UnixMilli()
	_, err := g.st.CreateTasks(context.Background(), []store.NewTask{
		{ID: 1, Type: g.typ, Priority: contracts.PriorityNormal, Status: contracts.StatusReady, Route: events.RouteDispatched,
			NextRunTimeMs: now, MaxRetries: 3, TimeoutMs: g.typTO.Milliseconds(), Reason: "test", DAG: true},
		{ID: 2, Type: g.typ, Priority: contracts.PriorityNormal, Status: contracts.StatusSuspend, Payload: []byte(`{"n":2}`),
			NextRunTimeMs: now, MaxRetries: 5, TimeoutMs: 7000, Reason: "test", DAG: true,
			Parents: []store.Dependency{{ParentID: 1, When: contracts.WhenSuccess}}},
	})
	require.NoError(t, err)
	g.send(t, 1, events.ExecSubject(g.typ, contracts.PriorityNormal, events.SharedToken))
	<-runs
	var child seen
	select {
	case child = <-runs:
	case <-time.After(20 * time.Second):
		t.Fatal("the child did not run")
	}
	require.JSONEq(t, `{"n":2}`, child.payload)
	require.InDelta(t, 7*time.Second, child.timeout, float64(time.Second), "the child's own timeout")
	testenv.Eventually(t, 10*time.Second, "the child retried", func() bool {
		return strings.HasSuffix(g.history(t, 2), ">FAILED>RETRYING")
	})
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []int64{1}, read, "only the parent's claim read its row")
}
