package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

var nextID int64 = 1000

func newTask(t *testing.T, st *store.Store, bizKey *string) *store.Task {
	t.Helper()
	nextID++
	task, _, err := st.CreateTask(context.Background(), store.NewTask{
		ID: nextID, Type: "ax.noop", Priority: contracts.PriorityNormal, BizKey: bizKey,
		Payload: []byte(`{}`), Status: contracts.StatusReady, NextRunTimeMs: time.Now().UnixMilli(),
		MaxRetries: 3, TimeoutMs: 1000, Reason: "test",
	})
	require.NoError(t, err)
	return task
}

// counts is what a task left behind: history rows, and the events the
// relay publishes for them (read by a real relay pass).
type counts struct{ history, events int }

func countRows(t *testing.T, st *store.Store, taskID int64) counts {
	t.Helper()
	var c counts
	require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM task_history WHERE task_id = ?`, taskID).Scan(&c.history))
	for _, e := range relayAll(t, st) {
		if e.CorrelationID == strconv.FormatInt(taskID, 10) {
			c.events++
		}
	}
	return c
}

// relayAll returns the events a relay would publish now, without moving the
// cursor (the publish callback fails, so the pass rolls back).
func relayAll(t *testing.T, st *store.Store) []store.OutboxRow {
	t.Helper()
	var got []store.OutboxRow
	stop := errors.New("read only")
	cursor, err := st.RelayCursor(context.Background())
	require.NoError(t, err)
	_, err = st.RelayHistory(context.Background(), cursor, 100000, store.NewHistoryGaps(time.Nanosecond, 0),
		func(_ context.Context, rows []store.OutboxRow) error {
			got = rows
			return stop
		})
	if err != nil {
		require.ErrorIs(t, err, stop)
	}
	return got
}

func TestTransferRaceHasExactlyOneWinner(t *testing.T) {
	st, _ := testenv.Store(t)
	task := newTask(t, st, nil)

	const racers = 20
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, racers)
	for i := range racers {
		wg.Go(func() {
			<-start
			zero := 0
			_, errs[i] = st.Transfer(context.Background(), store.TransferParams{
				TaskID: task.ID, From: contracts.StatusReady, To: contracts.StatusRunning,
				Reason: "race", Attempt: &zero, Claim: true, Executor: "racer",
			})
		})
	}
	close(start)
	wg.Wait()

	wins, conflicts := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case errors.Is(err, store.ErrConflict):
			conflicts++
		default:
			t.Fatalf("unexpected error: %v", err)
		}
	}
	require.Equal(t, 1, wins, "exactly one transfer must win")
	require.Equal(t, racers-1, conflicts)

	got, err := st.GetTask(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, contracts.StatusRunning, got.Status)
	require.Equal(t, 1, got.Attempt, "attempt incremented once")
	// One row each for the creation and the single winning transfer.
	require.Equal(t, counts{history: 2, events: 2}, countRows(t, st, task.ID))
}

// TestAFailingWriteRollsBack: a transfer's UPDATE and history INSERT are
// followed by a statement that fails. Nothing of them stays, and the
// connection goes back to the pool with no transaction open: the pool has
// one connection, and the next caller's transaction would otherwise commit
// the doomed writes.
func TestAFailingWriteRollsBack(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	st.DB().SetMaxOpenConns(1)
	task := newTask(t, st, nil)
	before := countRows(t, st, task.ID)

	_, err := st.Transfer(ctx, store.TransferParams{
		TaskID: task.ID, From: contracts.StatusReady, To: contracts.StatusCancelled, Reason: "doomed",
		Also: func(ctx context.Context, tx store.Execer) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO no_such_table VALUES (1)`)
			return err
		},
	})
	require.ErrorContains(t, err, "no_such_table")

	newTask(t, st, nil) // commits on the same connection
	got, err := st.GetTask(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, contracts.StatusReady, got.Status)
	require.Equal(t, before, countRows(t, st, task.ID))
}

// TestACancelledTransactionLeavesNothing: the caller gives up after the
// transfer's writes went out (the driver then drops the connection
// mid-transaction). Nothing stays, and the pool of one goes on with a
// working connection.
func TestACancelledTransactionLeavesNothing(t *testing.T) {
	st, _ := testenv.Store(t)
	st.DB().SetMaxOpenConns(1)
	task := newTask(t, st, nil)
	before := countRows(t, st, task.ID)

	ctx, cancel := context.WithCancel(context.Background())
	_, err := st.Transfer(ctx, store.TransferParams{
		TaskID: task.ID, From: contracts.StatusReady, To: contracts.StatusCancelled, Reason: "abandoned",
		Also: func(_ context.Context, tx store.Execer) error {
			// After the UPDATE and history INSERT, a statement that runs
			// for a second while the caller gives up.
			go func() { time.Sleep(100 * time.Millisecond); cancel() }()
			_, err := tx.ExecContext(ctx, `SELECT SLEEP(1)`)
			return err
		},
	})
	require.ErrorIs(t, err, context.Canceled)

	newTask(t, st, nil)
	got, err := st.GetTask(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, contracts.StatusReady, got.Status)
	require.Equal(t, before, countRows(t, st, task.ID))
}

// TestACallerGivingUpLearnsTheOutcome: the caller gives up while its
// transaction runs, or before it starts. The answer must match what
// happened: an error, and nothing changed (an error with the change made
// would have a claim's lease released while the task stays RUNNING).
func TestACallerGivingUpLearnsTheOutcome(t *testing.T) {
	st, _ := testenv.Store(t)
	task := newTask(t, st, nil)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(150*time.Millisecond, cancel)

	err := st.ChangeStatusForTest(ctx, task.ID, contracts.StatusReady, contracts.StatusCancelled, 0.5)
	require.ErrorIs(t, err, context.Canceled, "the sleep after the update is interrupted, before COMMIT")
	got, err := st.GetTask(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, contracts.StatusReady, got.Status)

	// Given up before the transaction went out: nothing is written.
	other := newTask(t, st, nil)
	err = st.ChangeStatusForTest(ctx, other.ID, contracts.StatusReady, contracts.StatusCancelled, 0)
	require.ErrorIs(t, err, context.Canceled)
	got, err = st.GetTask(context.Background(), other.ID)
	require.NoError(t, err)
	require.Equal(t, contracts.StatusReady, got.Status)
}

// TestAnUpdateOfARowInAnotherStateFails: the batch does not read its
// UPDATEs' row counts (their rows are locked and were checked), so a row
// that is not in the state its step names (which the batch's checks rule
// out: a bug) must fail the statement rather than match fewer rows.
func TestAnUpdateOfARowInAnotherStateFails(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	task := newTask(t, st, nil)

	err := st.ChangeStatusForTest(ctx, task.ID, contracts.StatusRunning, contracts.StatusSuccess, 0)
	require.ErrorContains(t, err, "cannot be null")
	got, err := st.GetTask(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, contracts.StatusReady, got.Status, "nothing committed")

	require.NoError(t, st.ChangeStatusForTest(ctx, task.ID, contracts.StatusReady, contracts.StatusCancelled, 0))
	got, err = st.GetTask(ctx, task.ID)
	require.NoError(t, err)
	require.Equal(t, contracts.StatusCancelled, got.Status, "a row in the step's from state changes")
}

func TestTransferRollbackLeavesNoHistoryAndNoEvent(t *testing.T) {
	st, _ := testenv.Store(t)
	task := newTask(t, st, nil)
	before := countRows(t, st, task.ID)

	boom := errors.New("boom after the history row was written")
	_, err := st.Transfer(context.Background(), store.TransferParams{
		TaskID: task.ID, From: contracts.StatusReady, To: contracts.StatusCancelled, Reason: "doomed",
		Also: func(context.Context, store.Execer) error { return boom },
	})
	require.ErrorIs(t, err, boom)

	got, err := st.GetTask(context.Background(), task.ID)
	require.NoError(t, err)
	require.Equal(t, contracts.StatusReady, got.Status, "the row update was rolled back")
	require.Equal(t, before, countRows(t, st, task.ID), "no history row and no event survive a rollback")
}

func TestTransferIsFencedByAttempt(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	task := newTask(t, st, nil)
	zero, one := 0, 1
	_, err := st.Transfer(ctx, store.TransferParams{TaskID: task.ID, From: contracts.StatusReady,
		To: contracts.StatusRunning, Attempt: &zero, Claim: true, Executor: "a", Reason: "claim"})
	require.NoError(t, err)

	_, err = st.Transfer(ctx, store.TransferParams{TaskID: task.ID, From: contracts.StatusRunning,
		To: contracts.StatusSuccess, Attempt: &zero, Reason: "stale writer"})
	var ce *store.ConflictError
	require.ErrorAs(t, err, &ce)
	require.True(t, ce.Fenced)
	require.Equal(t, 1, ce.ActualAttempt)
	require.Contains(t, ce.Error(), "stale")

	res, err := st.Transfer(ctx, store.TransferParams{TaskID: task.ID, From: contracts.StatusRunning,
		To: contracts.StatusSuccess, Attempt: &one, Reason: "current writer"})
	require.NoError(t, err)
	require.Equal(t, 1, res.Attempt)
	require.Equal(t, counts{history: 3, events: 3}, countRows(t, st, task.ID))
}

func TestIllegalTransitionChangesNothing(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	task := newTask(t, st, nil)
	_, err := st.Transfer(ctx, store.TransferParams{TaskID: task.ID, From: contracts.StatusReady, To: contracts.StatusCancelled, Reason: "x"})
	require.NoError(t, err)
	before := countRows(t, st, task.ID)

	for _, to := range []contracts.Status{contracts.StatusRunning, contracts.StatusReady, contracts.StatusSuccess} {
		_, err = st.Transfer(ctx, store.TransferParams{TaskID: task.ID, From: contracts.StatusCancelled, To: to, Reason: "x"})
		require.ErrorIs(t, err, store.ErrIllegalTransition, "CANCELLED -> %s", to)
	}
	// From the wrong state: legal in the table but not what the row holds.
	_, err = st.Transfer(ctx, store.TransferParams{TaskID: task.ID, From: contracts.StatusReady, To: contracts.StatusRunning, Reason: "x"})
	require.ErrorIs(t, err, store.ErrConflict)
	require.Equal(t, before, countRows(t, st, task.ID))

	_, err = st.Transfer(ctx, store.TransferParams{TaskID: 999999999, From: contracts.StatusReady, To: contracts.StatusRunning, Reason: "x"})
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestBizKeyDedupComparesBytes(t *testing.T) {
	st, _ := testenv.Store(t)
	keys := []string{"a", "A", "a ", "ä"}
	ids := map[int64]bool{}
	for _, k := range keys {
		task := newTask(t, st, &k)
		ids[task.ID] = true
	}
	require.Len(t, ids, len(keys), "keys differing in case or trailing space are distinct")

	k := "a"
	nextID++
	dup, dedup, err := st.CreateTask(context.Background(), store.NewTask{
		ID: nextID, Type: "ax.noop", Priority: contracts.PriorityNormal, BizKey: &k,
		Status: contracts.StatusReady, NextRunTimeMs: 1, MaxRetries: 3, TimeoutMs: 1000, Reason: "dup",
	})
	require.NoError(t, err)
	require.True(t, dedup)
	require.NotEqual(t, nextID, dup.ID)
	require.True(t, ids[dup.ID])
	var n int
	require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM tasks`).Scan(&n))
	require.Equal(t, len(keys), n, "a duplicate never inserts a row")
	require.Equal(t, counts{}, countRows(t, st, nextID), "a duplicate writes no history or event")
}

func TestHistoryOfUnknownTaskIsNotFound(t *testing.T) {
	st, _ := testenv.Store(t)
	_, err := st.History(context.Background(), 42)
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.GetTask(context.Background(), 42)
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestLongActorIsTruncatedNotRefused(t *testing.T) {
	st, _ := testenv.Store(t)
	task := newTask(t, st, nil)
	long := strings.Repeat("operator-", 40) // 360 bytes; the column holds 255
	_, err := st.Transfer(context.Background(), store.TransferParams{TaskID: task.ID, From: contracts.StatusReady,
		To: contracts.StatusCancelled, Reason: "x", Actor: long})
	require.NoError(t, err)
	h, err := st.History(context.Background(), task.ID)
	require.NoError(t, err)
	require.Len(t, h[1].Actor, 255)
	require.True(t, strings.HasPrefix(long, strings.TrimSuffix(h[1].Actor, "...")))
}

// TestRouteIsCarriedOnReadyEventsOnly: the writer's route reaches the READY
// event through the history row; on any other state it is dropped.
func TestRouteIsCarriedOnReadyEventsOnly(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	nextID++
	task, _, err := st.CreateTask(ctx, store.NewTask{ID: nextID, Type: "ax.noop", Priority: contracts.PriorityLow,
		Status: contracts.StatusReady, NextRunTimeMs: 1, MaxRetries: 3, TimeoutMs: 1000, Reason: "test",
		Route: events.RouteDispatch})
	require.NoError(t, err)
	zero, one := 0, 1
	_, err = st.TransferChain(ctx,
		store.TransferParams{TaskID: task.ID, From: contracts.StatusReady, To: contracts.StatusRunning, Attempt: &zero,
			Claim: true, Executor: "n1", Reason: "claim", Route: events.RouteDispatch},
		store.TransferParams{TaskID: task.ID, From: contracts.StatusRunning, To: contracts.StatusReady, Attempt: &one,
			ClearExecutor: true, Reason: "hand back", Route: events.RouteDispatched})
	require.NoError(t, err)
	var routes []events.Route
	for _, e := range relayAll(t, st) {
		var ev events.TaskTransferred
		require.NoError(t, json.Unmarshal(e.Payload, &ev))
		require.Equal(t, contracts.PriorityLow, ev.Priority)
		routes = append(routes, ev.Route)
	}
	require.Equal(t, []events.Route{events.RouteDispatch, events.RouteTimer, events.RouteDispatched}, routes)
}
