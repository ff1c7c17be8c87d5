package executor

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/membership"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// A task whose handler returns inside the window has its claim and its
// outcome written by one transaction: both history rows carry the one
// timestamp a transaction stamps on all it writes (microseconds), where
// the claim-first path, two transactions, stamps two. The claim names the
// executor and its version, and the row records them, as before.
func TestQuickTaskIsClaimedInItsOutcomesTransaction(t *testing.T) {
	for _, tc := range []struct {
		name   string
		window time.Duration
		oneTx  bool
	}{
		{"fused", time.Minute, true},
		{"claim first", -1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, k := testenv.Redis(t)
			g := newFaultRig(t, "127.0.0.1:6379", k, "test.fused")
			g.window = tc.window
			ctx := context.Background()
			ran := make(chan int, 1)
			h := HandlerFunc(func(_ context.Context, task *Task) error {
				ran <- task.Attempt
				return nil
			})
			g.executor(t, "fuser", Config{VersionLabel: "v7"}, h, nil)
			g.dispatch(t, 1)
			select {
			case attempt := <-ran:
				require.Equal(t, 1, attempt)
			case <-time.After(20 * time.Second):
				t.Fatal("the task did not run")
			}
			testenv.Eventually(t, 10*time.Second, "the task SUCCESS", func() bool {
				return g.history(t, 1) == "READY>RUNNING>SUCCESS"
			})
			hist, err := g.st.History(ctx, 1)
			require.NoError(t, err)
			claim, done := hist[1], hist[2]
			require.Equal(t, 1, claim.Attempt)
			require.Equal(t, 1, done.Attempt)
			require.Contains(t, claim.Reason, "claimed by fuser (version v7)")
			require.Equal(t, tc.oneTx, claim.At.Equal(done.At), "claim at %s, outcome at %s", claim.At, done.At)
			task, err := g.st.GetTask(ctx, 1)
			require.NoError(t, err)
			require.Equal(t, "fuser", task.ExecutorAddr)
			require.Equal(t, "v7", task.ExecVersion)
			require.Equal(t, 1, task.Attempt)
		})
	}
}

// A dispatch whose task is no longer READY at its attempt fails the fence
// on the read: a lost claim as with the claim transaction — counted, the
// lease released, the message dropped — and nothing runs or is written.
func TestStaleDispatchIsALostClaimOnTheRead(t *testing.T) {
	rdb, k, g := windowRig(t, "test.fusedstale")
	ctx := context.Background()
	ran := make(chan int64, 2)
	g.executor(t, "reader", Config{}, HandlerFunc(func(_ context.Context, task *Task) error {
		ran <- task.ID
		return nil
	}), nil)
	g.dispatch(t, 1)
	require.EqualValues(t, 1, awaitStart(t, ran))
	testenv.Eventually(t, 10*time.Second, "the task SUCCESS", func() bool {
		return g.history(t, 1) == "READY>RUNNING>SUCCESS"
	})
	testenv.Eventually(t, 10*time.Second, "the lease released", func() bool {
		return rdb.Exists(ctx, k.Lock(1)).Val() == 0
	})
	lost := testutil.ToFloat64(metrics.ExecutorClaimsLost.WithLabelValues(g.typ))
	data, err := events.Encode(events.TaskDispatched{TaskID: 1, Type: g.typ, Attempt: 0, Load: true})
	require.NoError(t, err)
	g.publish(t, 1, events.ExecSubject(g.typ, contracts.PriorityNormal, events.SharedToken), data)
	testenv.Eventually(t, 20*time.Second, "the stale dispatch counted as a lost claim", func() bool {
		return testutil.ToFloat64(metrics.ExecutorClaimsLost.WithLabelValues(g.typ)) == lost+1
	})
	require.Equal(t, "READY>RUNNING>SUCCESS", g.history(t, 1))
	require.Zero(t, rdb.Exists(ctx, k.Lock(1)).Val(), "the lease of the lost claim released")
	select {
	case id := <-ran:
		t.Fatalf("task %d ran again", id)
	default:
	}
}

// held is a handler that reports each task it starts and returns when
// release is closed or its context ends, saying why it ended.
func held(started chan<- int64, release <-chan struct{}, cause chan<- error) Handler {
	return HandlerFunc(func(ctx context.Context, task *Task) error {
		started <- task.ID
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			if cause != nil {
				cause <- context.Cause(ctx)
			}
			return ctx.Err()
		}
	})
}

// windowRig is a fault rig on the shared Redis (the test's own key
// prefix) whose executors hold handlers inside a window of a minute.
func windowRig(t *testing.T, typ string) (redis.UniversalClient, keys.Keys, *faultRig) {
	t.Helper()
	rdb, k := testenv.Redis(t)
	g := newFaultRig(t, "127.0.0.1:6379", k, typ)
	g.window = time.Minute
	return rdb, k, g
}

// cancelReady cancels READY task id as the API would.
func (g *faultRig) cancelReady(t *testing.T, id int64) {
	t.Helper()
	_, err := g.st.Transfer(context.Background(), store.TransferParams{TaskID: id, From: contracts.StatusReady,
		To: contracts.StatusCancelled, Reason: "test: cancelled"})
	require.NoError(t, err)
}

// requireRefusedClaim checks that task id's history ends with the
// recorded refusal of a claim by node, and returns that row.
func (g *faultRig) requireRefusedClaim(t *testing.T, id int64, prefix, node string) store.HistoryRow {
	t.Helper()
	hist, err := g.st.History(context.Background(), id)
	require.NoError(t, err)
	last := hist[len(hist)-1]
	require.True(t, strings.HasPrefix(last.Reason, prefix), last.Reason)
	require.Contains(t, last.Reason, "claimed by "+node)
	return last
}

func awaitStart(t *testing.T, started <-chan int64) int64 {
	t.Helper()
	select {
	case id := <-started:
		return id
	case <-time.After(20 * time.Second):
		t.Fatal("the task did not start")
		return 0
	}
}

// A handler still running when the window ends has its claim written on
// its own: the task is RUNNING at the new attempt while the handler runs,
// and its outcome follows in a transaction of its own.
func TestTaskLongerThanTheWindowIsClaimedWhenItEnds(t *testing.T) {
	_, k := testenv.Redis(t)
	g := newFaultRig(t, "127.0.0.1:6379", k, "test.fusedlong")
	g.window = 200 * time.Millisecond
	ctx := context.Background()
	started := make(chan int64, 1)
	release := make(chan struct{})
	g.executor(t, "slow", Config{}, held(started, release, nil), nil)
	g.dispatch(t, 1)
	awaitStart(t, started)
	testenv.Eventually(t, 10*time.Second, "the task RUNNING while its handler runs", func() bool {
		task, err := g.st.GetTask(ctx, 1)
		require.NoError(t, err)
		return task.Status == contracts.StatusRunning
	})
	task, err := g.st.GetTask(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, 1, task.Attempt)
	require.Equal(t, "slow", task.ExecutorAddr)
	require.Equal(t, "READY>RUNNING", g.history(t, 1))
	close(release)
	testenv.Eventually(t, 10*time.Second, "the task SUCCESS", func() bool {
		return g.history(t, 1) == "READY>RUNNING>SUCCESS"
	})
	hist, err := g.st.History(ctx, 1)
	require.NoError(t, err)
	require.False(t, hist[1].At.Equal(hist[2].At), "the claim was written before the handler returned")
}

// A task cancelled while its handler runs inside the window, its claim
// not yet written: the handler's outcome is not written, the refused claim
// is recorded in the task's history and the lease is released. While it
// ran, the node's heartbeat listed the task, READY as it was in MySQL.
func TestTaskCancelledInsideTheWindowRecordsTheRefusedClaim(t *testing.T) {
	rdb, k, g := windowRig(t, "test.fusedcancel")
	ctx := context.Background()
	started := make(chan int64, 1)
	release := make(chan struct{})
	g.executor(t, "runner", Config{HeartbeatInterval: 100 * time.Millisecond}, held(started, release, nil), nil)
	g.dispatch(t, 1)
	awaitStart(t, started)
	require.Equal(t, "READY", g.history(t, 1))
	testenv.Eventually(t, 10*time.Second, "the heartbeat lists the running task", func() bool {
		nodes, err := membership.List(ctx, rdb, k.Nodes(), time.Now(), time.Minute)
		require.NoError(t, err)
		for _, n := range nodes {
			if n.Name == "runner" && slices.Contains(n.Running, "1") {
				return true
			}
		}
		return false
	})
	g.cancelReady(t, 1)
	close(release)
	testenv.Eventually(t, 10*time.Second, "the refused claim recorded", func() bool {
		return g.history(t, 1) == "READY>CANCELLED>CANCELLED"
	})
	g.requireRefusedClaim(t, 1, "rejected READY->RUNNING from attempt 0: the task is CANCELLED", "runner")
	testenv.Eventually(t, 10*time.Second, "the lease released", func() bool {
		return rdb.Exists(ctx, k.Lock(1)).Val() == 0
	})
	task, err := g.st.GetTask(ctx, 1)
	require.NoError(t, err)
	require.Equal(t, contracts.StatusCancelled, task.Status)
	require.Equal(t, 0, task.Attempt)
}

// The CANCELLED event of a task cancelled while READY stops a handler
// running it inside the window at once, as it stops a claimed run's; the
// run's chain is still written, so its refused claim is on record, and
// no outcome is.
func TestCancellationEventStopsAHandlerInsideTheWindow(t *testing.T) {
	_, _, g := windowRig(t, "test.fusedevent")
	ctx := context.Background()
	started := make(chan int64, 1)
	cause := make(chan error, 1)
	g.executor(t, "stopper", Config{}, held(started, nil, cause), nil)
	g.dispatch(t, 1)
	awaitStart(t, started)
	g.cancelReady(t, 1)
	// What the relay publishes for the cancellation (no relay runs here),
	// travelling with another task's.
	data, err := events.Encode(events.TaskTransfers{Transfers: []events.TaskTransferred{
		{TaskID: 99, Type: g.typ, From: contracts.StatusReady, To: contracts.StatusCancelled},
		{TaskID: 1, Type: g.typ, From: contracts.StatusReady, To: contracts.StatusCancelled, Attempt: 0}}})
	require.NoError(t, err)
	pub, err := bus.Connect(ctx, g.url, "test-relay")
	require.NoError(t, err)
	defer pub.Close()
	require.NoError(t, pub.NC.PublishMsg(&nats.Msg{Subject: events.TaskEventSubject(contracts.StatusCancelled), Data: data,
		Header: nats.Header{events.HeaderEventType: []string{events.TypeTaskTransfers}}}))
	select {
	case err := <-cause:
		require.ErrorIs(t, err, errCancelled)
	case <-time.After(20 * time.Second):
		t.Fatal("the handler was not cancelled")
	}
	testenv.Eventually(t, 10*time.Second, "the refused claim recorded", func() bool {
		return g.history(t, 1) == "READY>CANCELLED>CANCELLED"
	})
	g.requireRefusedClaim(t, 1, "rejected READY->RUNNING from attempt 0: the task is CANCELLED", "stopper")
}

// A handler still running when the window ends on a task cancelled
// meanwhile: the claim is refused (and recorded), and the handler is
// cancelled with that cause; nothing more is written. The test ends the
// window itself (claimLate, what the window's timer calls), after the
// cancellation has committed.
func TestClaimRefusedWhenTheWindowEndsCancelsTheHandler(t *testing.T) {
	rdb, k, g := windowRig(t, "test.fusedrefused")
	ctx := context.Background()
	started := make(chan int64, 1)
	cause := make(chan error, 1)
	e, _ := g.executor(t, "late", Config{}, held(started, nil, cause), nil)
	g.dispatch(t, 1)
	awaitStart(t, started)
	g.cancelReady(t, 1)
	e.mu.Lock()
	r := e.running[1]
	e.mu.Unlock()
	require.NotNil(t, r)
	e.claimLate(r)
	select {
	case err := <-cause:
		require.ErrorIs(t, err, errClaimRefused)
	case <-time.After(20 * time.Second):
		t.Fatal("the handler was not cancelled")
	}
	testenv.Eventually(t, 10*time.Second, "the lease released", func() bool {
		return rdb.Exists(ctx, k.Lock(1)).Val() == 0
	})
	require.Equal(t, "READY>CANCELLED>CANCELLED", g.history(t, 1))
	g.requireRefusedClaim(t, 1, "rejected READY->RUNNING from attempt 0: the task is CANCELLED", "late")
}

// After Redis lost a running task's lease, a second executor can lease and
// start the same task inside the first one's window: both handlers run,
// and the fence on the claims lets exactly one outcome through; the
// other's refusal is in the task's history.
func TestTwoExecutorsAfterALeaseLossRecordOneOutcome(t *testing.T) {
	rdb, k, g := windowRig(t, "test.fusedtwice")
	ctx := context.Background()
	started := make(chan int64, 2)
	release := make(chan struct{})
	// Renewals far apart: the first executor must not take its lease back.
	cfg := Config{RenewInterval: time.Minute}
	g.executor(t, "first", cfg, held(started, release, nil), nil)
	g.dispatch(t, 1)
	awaitStart(t, started)
	require.Equal(t, "first:1", rdb.Get(ctx, k.Lock(1)).Val())
	require.NoError(t, rdb.Del(ctx, k.Lock(1)).Err()) // the lease lost with Redis

	g.executor(t, "second", cfg, held(started, release, nil), nil)
	g.send(t, 1, events.ExecSubject(g.typ, contracts.PriorityNormal, events.NodeToken("second")))
	awaitStart(t, started)
	require.Equal(t, "second:1", rdb.Get(ctx, k.Lock(1)).Val())
	close(release)

	testenv.Eventually(t, 10*time.Second, "one outcome and one refusal recorded", func() bool {
		return len(g.history(t, 1)) > 0 && strings.Count(g.history(t, 1), ">") == 3
	})
	require.Equal(t, "READY>RUNNING>SUCCESS>SUCCESS", g.history(t, 1))
	hist, err := g.st.History(ctx, 1)
	require.NoError(t, err)
	task, err := g.st.GetTask(ctx, 1)
	require.NoError(t, err)
	winner := task.ExecutorAddr
	loser := map[string]string{"first": "second", "second": "first"}[winner]
	require.NotEmpty(t, loser, "executor %q", winner)
	require.Contains(t, hist[1].Reason, "claimed by "+winner)
	require.Equal(t, hist[1].At, hist[2].At, "the winner's claim and outcome in one transaction")
	g.requireRefusedClaim(t, 1, "rejected READY->RUNNING from attempt 0: the task is SUCCESS at attempt 1", loser)
	require.Equal(t, 1, task.Attempt)
}

// An executor killed while its handler runs inside the window leaves a
// lease on a READY task and an unacknowledged dispatch, as one killed
// between its lease and its claim: the dispatch comes back, the next
// claimant takes the dead node's lease over, and the task runs once more
// and succeeds once, the take-over recorded in its claim's history row.
func TestExecutorKilledInsideTheWindowIsRecovered(t *testing.T) {
	rdb, k, g := windowRig(t, "test.fusedkill")
	started := make(chan int64, 1)
	never := make(chan struct{})
	defer close(never)
	_, kill := g.executor(t, "victim", Config{ShutdownTimeout: 100 * time.Millisecond}, held(started, never, nil), nil)
	g.dispatch(t, 1)
	awaitStart(t, started)
	require.Equal(t, "victim:1", rdb.Get(context.Background(), k.Lock(1)).Val())
	require.Equal(t, "READY", g.history(t, 1))
	kill()
	killed := time.Now()
	g.window = 0
	g.executor(t, "survivor", Config{}, HandlerFunc(func(context.Context, *Task) error { return nil }), nil)

	testenv.Eventually(t, 60*time.Second, "the task SUCCESS on the survivor", func() bool {
		return g.history(t, 1) == "READY>RUNNING>SUCCESS"
	})
	t.Logf("task ran %s after its executor was killed inside the window (type timeout %s)",
		time.Since(killed).Round(100*time.Millisecond), g.typTO)
	task, err := g.st.GetTask(context.Background(), 1)
	require.NoError(t, err)
	require.Equal(t, 1, task.Attempt)
	require.Equal(t, "survivor", task.ExecutorAddr)
	hist, err := g.st.History(context.Background(), 1)
	require.NoError(t, err)
	require.Contains(t, hist[1].Reason, "took over lease victim:1")
}

// send publishes task id's lean dispatch, as its row says, on subject, as
// a dispatcher would.
func (g *faultRig) send(t *testing.T, id int64, subject string) {
	t.Helper()
	task, err := g.st.GetTask(context.Background(), id)
	require.NoError(t, err)
	data, err := events.Encode(events.TaskDispatched{TaskID: id, Type: g.typ, Attempt: task.Attempt,
		NextRunTimeMs: task.NextRunTimeMs, Load: true})
	require.NoError(t, err)
	g.publish(t, id, subject, data)
}

// publish sends the encoded dispatch data of task id on subject.
func (g *faultRig) publish(t *testing.T, id int64, subject string, data []byte) {
	t.Helper()
	g.publishMsgs(t, bus.Msg{Subject: subject,
		EventType: events.TypeTaskDispatched, CorrelationID: strconv.FormatInt(id, 10), Data: data})
}

// A fused run's dispatch is acknowledged only once its outcome commits.
// An outcome writer held up past the ack wait (MySQL slow: 7 s here,
// against bus.ExecAckWait's 5) must not have the dispatch delivered again:
// the intake tells JetStream it is in progress, so no contest follows, no
// claim is lost, and the task runs once.
func TestFusedDispatchIsKeptAliveWhileItsOutcomeWaits(t *testing.T) {
	_, _, g := windowRig(t, "test.fusedkeep")
	ran := make(chan int64, 2)
	held := make(chan struct{})
	var once sync.Once
	g.beforeRecord = func() {
		once.Do(func() {
			close(held)
			time.Sleep(bus.ExecAckWait + 2*time.Second)
		})
	}
	g.executor(t, "patient", Config{}, HandlerFunc(func(_ context.Context, task *Task) error {
		ran <- task.ID
		return nil
	}), nil)
	lost := testutil.ToFloat64(metrics.ExecutorClaimsLost.WithLabelValues(g.typ))
	g.dispatch(t, 1)
	require.EqualValues(t, 1, awaitStart(t, ran))
	<-held
	g.awaitStatus(t, 1, contracts.StatusSuccess)
	require.Equal(t, "READY>RUNNING>SUCCESS", g.history(t, 1))
	require.Equal(t, lost, testutil.ToFloat64(metrics.ExecutorClaimsLost.WithLabelValues(g.typ)), "no contest for the dispatch")
	conn, err := bus.Connect(context.Background(), g.url, "test-inspector")
	require.NoError(t, err)
	defer conn.Close()
	c, err := conn.JS.Consumer(context.Background(), events.StreamWork, events.ExecConsumer(g.typ, contracts.PriorityNormal, events.SharedToken))
	require.NoError(t, err)
	info, err := c.Info(context.Background())
	require.NoError(t, err)
	require.Zero(t, info.NumRedelivered, "the dispatch was not delivered again")
	select {
	case id := <-ran:
		t.Fatalf("task %d ran again", id)
	default:
	}
}
