package executor

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/dispatch"
	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/store"
)

// chainOf creates the chain ids[0] -> ids[1] -> ...: the first READY and
// due, each next one SUSPEND until the one before it succeeds.
func (g *faultRig) chainOf(t *testing.T, ids ...int64) {
	t.Helper()
	nts := make([]store.NewTask, len(ids))
	for i, id := range ids {
		nts[i] = store.NewTask{ID: id, Type: g.typ, Priority: contracts.PriorityNormal, Status: contracts.StatusSuspend,
			NextRunTimeMs: time.Now().UnixMilli(), MaxRetries: 3, TimeoutMs: g.typTO.Milliseconds(), Reason: "test", DAG: true}
		if i == 0 {
			nts[i].Status, nts[i].Route = contracts.StatusReady, events.RouteDispatched
		} else {
			nts[i].Parents = []store.Dependency{{ParentID: ids[i-1], When: contracts.WhenSuccess}}
		}
	}
	_, err := g.st.CreateTasks(context.Background(), nts)
	require.NoError(t, err)
}

// requireReleasedOnce checks that child id was released once, by an
// executor's outcome, and ran once: SUSPEND, READY routed "dispatched"
// (the relay leaves it alone), RUNNING, SUCCESS.
func (g *faultRig) requireReleasedOnce(t *testing.T, id int64) {
	t.Helper()
	require.Equal(t, "SUSPEND>READY>RUNNING>SUCCESS", g.history(t, id))
	var route int
	require.NoError(t, g.st.DB().QueryRow(`SELECT route FROM task_history WHERE task_id = ? AND to_status = 'READY'`, id).Scan(&route))
	require.Equal(t, 2, route, "task %d: READY routed dispatched (history.route 2)", id)
}

// The executor dispatches the children its outcomes release, right after
// the commit: with no relay and no timer running here, nothing else could
// get a released child to an executor. A chain of three runs to its end,
// each child released once (SUSPEND, READY, RUNNING, SUCCESS), its READY
// row saying "dispatched" (the relay leaves it alone) and the task marked
// dispatched in Redis (the reconciler leaves it alone).
func TestExecutorDispatchesTheChildrenItReleases(t *testing.T) {
	rdb, k, g := windowRig(t, "test.release")
	g.direct = true
	ran := make(chan int64, 3)
	g.executor(t, "releaser", Config{SendReleased: true}, reporting(ran), nil)
	g.runChain(t, ran, rdb, k, true)
}

// runChain runs the chain 1 -> 2 -> 3 from a dispatch of 1 and checks that
// each child was released once and ran once, marked dispatched in Redis
// or not as marked says.
func (g *faultRig) runChain(t *testing.T, ran <-chan int64, rdb redis.UniversalClient, k keys.Keys, marked bool) {
	t.Helper()
	g.chainOf(t, 1, 2, 3)
	g.send(t, 1, events.ExecSubject(g.typ, contracts.PriorityNormal, events.SharedToken))
	awaitInOrder(t, ran, 1, 2, 3)
	g.awaitStatus(t, 3, contracts.StatusSuccess)
	for _, id := range []int64{2, 3} {
		g.requireReleasedOnce(t, id)
		_, err := rdb.ZScore(context.Background(), k.Dispatched(), strconv.FormatInt(id, 10)).Result()
		if marked {
			require.NoError(t, err, "task %d marked dispatched", id)
		} else {
			require.ErrorIs(t, err, redis.Nil, "task %d not marked dispatched", id)
		}
	}
	requireQuiet(t, ran, "ran twice")
}

// A release whose dispatch is lost after the commit (the process killed
// between the two, NATS refusing the send) leaves its child READY and
// unmarked: exactly what the timer's reconciler looks for, so it is
// re-driven from MySQL after the grace, as a lost dispatch of a
// submission is. So does a child the executor would have taken up itself
// (the process killed before it did).
func TestALostReleaseIsLeftToTheReconciler(t *testing.T) {
	for _, here := range []bool{false, true} {
		t.Run(map[bool]string{false: "sent", true: "taken up here"}[here], func(t *testing.T) {
			lostRelease(t, here)
		})
	}
}

func lostRelease(t *testing.T, here bool) {
	_, _, g := windowRig(t, "test.releaselost")
	g.direct = true
	ran := make(chan int64, 2)
	dropped := make(chan []int64, 1)
	drop := func(tasks []dispatch.Task) bool {
		ids := make([]int64, len(tasks))
		for i, task := range tasks {
			ids[i] = task.Dispatch.TaskID
		}
		dropped <- ids
		return true
	}
	if here {
		g.dropHere = drop
	} else {
		g.dropReleases = drop
	}
	e, _ := g.executor(t, "dropper", Config{SendReleased: !here}, reporting(ran), nil)
	if here {
		awaitOwner(t, e, g.typ, 2)
	}
	g.chainOf(t, 1, 2)
	g.send(t, 1, events.ExecSubject(g.typ, contracts.PriorityNormal, events.SharedToken))
	select {
	case ids := <-dropped:
		require.Equal(t, []int64{2}, ids)
	case <-time.After(20 * time.Second):
		t.Fatal("the release was not handed to the queue")
	}
	require.EqualValues(t, 1, <-ran)
	g.awaitStatus(t, 2, contracts.StatusReady)
	stale, err := g.st.StaleReady(context.Background(), time.Now().Add(time.Minute).UnixMilli(), 0, nil, 10)
	require.NoError(t, err)
	var found bool
	for _, d := range stale {
		found = found || d.ID == 2
	}
	require.True(t, found, "the reconciler's query finds the child: %+v", stale)
	requireQuiet(t, ran, "ran without a dispatch")
}

// A task failing once with a backoff shorter than the way to its outcome's
// commit is retried without the timer: the outcome's transaction ends the
// backoff (FAILED, RETRYING, READY in one commit) and the executor
// dispatches the retry itself. No timer runs here, so nothing else could.
func TestAnElapsedBackoffIsRetriedByTheExecutor(t *testing.T) {
	_, _, g := windowRig(t, "test.retrynow")
	g.direct = true
	_, err := g.st.UpdateType(context.Background(), g.typ, "test", func(tt *store.TaskType) error {
		tt.BackoffBaseMs, tt.BackoffCapMs = 1, 1
		return nil
	})
	require.NoError(t, err)
	// The backoff (at most 1.5 ms with jitter) is planned when the handler
	// returns; an outcome committed within the same millisecond would find
	// it not yet over. Holding the writer a little makes "over by the
	// commit" certain, as it is in practice for any backoff shorter than
	// the way to the commit.
	g.beforeRecord = func() { time.Sleep(10 * time.Millisecond) }
	attempts := make(chan int, 3)
	g.executor(t, "retrier", Config{}, HandlerFunc(func(_ context.Context, task *Task) error {
		attempts <- task.Attempt
		if task.Attempt == 1 {
			return errors.New("first attempt fails")
		}
		return nil
	}), nil)
	g.dispatch(t, 1)
	awaitInOrder(t, attempts, 1, 2)
	g.awaitStatus(t, 1, contracts.StatusSuccess)
	require.Equal(t, "READY>RUNNING>FAILED>RETRYING>READY>RUNNING>SUCCESS", g.history(t, 1))
	h, err := g.st.History(context.Background(), 1)
	require.NoError(t, err)
	require.Equal(t, h[2].At, h[4].At, "failure and the end of its backoff in one transaction")
	require.Equal(t, "backoff elapsed", h[4].Reason)
}

// awaitInOrder waits for each of want to come out of got, in order.
func awaitInOrder[T comparable](t *testing.T, got <-chan T, want ...T) {
	t.Helper()
	for _, w := range want {
		select {
		case g := <-got:
			require.Equal(t, w, g)
		case <-time.After(20 * time.Second):
			t.Fatalf("%v did not come", w)
		}
	}
}

// reporting is a handler that succeeds, reporting each task it runs.
func reporting(ran chan<- int64) Handler {
	return HandlerFunc(func(_ context.Context, task *Task) error {
		ran <- task.ID
		return nil
	})
}

// requireQuiet fails when a task comes out of ran within half a second.
func requireQuiet(t *testing.T, ran <-chan int64, what string) {
	t.Helper()
	select {
	case id := <-ran:
		t.Fatalf("task %d %s", id, what)
	case <-time.After(500 * time.Millisecond):
	}
}
