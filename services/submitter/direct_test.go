package submitter_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/dispatch"
	"github.com/axsched/ax/services/internal/idgen"
	"github.com/axsched/ax/services/internal/outbox"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
	"github.com/axsched/ax/services/submitter"
)

// directFixture is a submitter that dispatches what it commits, the relay
// of its process, and what they share.
type directFixture struct {
	st    *store.Store
	dsn   string
	conn  *bus.Conn
	sub   *submitter.Submitter
	mux   *http.ServeMux
	relay *outbox.Relay
	// marked reports whether a task is marked dispatched in Redis.
	marked func(id int64) bool
}

func newDirectFixture(t *testing.T, relayCfg outbox.Config) *directFixture {
	t.Helper()
	st, dsn := testenv.Store(t)
	require.NoError(t, st.RegisterType(context.Background(), store.TaskType{Name: "ax.noop", TimeoutMs: 60000, MaxRetries: 3, Priority: contracts.PriorityNormal}))
	conn := testenv.NATS(t)
	rdb, k := testenv.Redis(t)
	logger := testenv.Logger(t)
	send := dispatch.New(dispatch.Config{Heartbeat: time.Second}, st, rdb, k, clock.System{}, logger)
	ids, err := idgen.New(1)
	require.NoError(t, err)
	f := &directFixture{st: st, dsn: dsn, conn: conn, mux: http.NewServeMux(),
		sub: submitter.New(submitter.Config{Node: "test", MaxPayload: 1024, MaxHorizon: time.Hour}, st, ids, clock.System{}, logger)}
	f.sub.Routes(f.mux)
	f.sub.DispatchWith(send, conn)
	relayCfg.Dispatch = send
	f.relay = outbox.New(relayCfg, st, conn, logger)
	f.marked = func(id int64) bool {
		_, err := rdb.ZScore(context.Background(), k.Dispatched(), strconv.FormatInt(id, 10)).Result()
		return err == nil
	}
	return f
}

// start runs the submitter and the relay until the test ends; stop ends
// the submitter alone.
func (f *directFixture) start(t *testing.T) (stop func()) {
	t.Helper()
	subCtx, stopSub := context.WithCancel(context.Background())
	relayCtx, stopRelay := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); _ = f.sub.Run(subCtx) }()
	go func() { defer wg.Done(); _ = f.relay.Run(relayCtx) }()
	t.Cleanup(func() { stopSub(); stopRelay(); wg.Wait() })
	testenv.Eventually(t, 5*time.Second, "submitter coalescing", f.sub.Coalescing)
	return stopSub
}

// submit posts one task due at once and returns its ID, or 0 when the
// submission failed.
func (f *directFixture) submit(t *testing.T, payload string) int64 {
	t.Helper()
	body := `{"type":"ax.noop"}`
	if payload != "" {
		body = `{"type":"ax.noop","payload":` + payload + `}`
	}
	rec := httptest.NewRecorder()
	f.mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/tasks", strings.NewReader(body)))
	if rec.Code != http.StatusCreated {
		return 0
	}
	var out contracts.Task
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &out))
	id, err := strconv.ParseInt(out.ID, 10, 64)
	require.NoError(t, err)
	return id
}

// admin connects to the fixture's database as the administrator, until
// the test ends.
func (f *directFixture) admin(t *testing.T) *sql.DB {
	t.Helper()
	adm, err := sql.Open("mysql", testenv.AdminDSN(t, f.dsn))
	require.NoError(t, err)
	t.Cleanup(func() { _ = adm.Close() })
	return adm
}

// openHole writes a history row in a transaction it leaves open: a hole
// in the history IDs that holds the relay's cursor until it is rolled
// back (the returned func) and the gap grace has passed.
func openHole(t *testing.T, db *sql.DB) (rollback func()) {
	t.Helper()
	rollback, err := hole(db)
	require.NoError(t, err)
	return rollback
}

func hole(db *sql.DB) (rollback func(), err error) {
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		return nil, err
	}
	_, err = tx.Exec(`INSERT INTO task_history (task_id, from_status, to_status, attempt, reason, actor, event_id, task_type)
		VALUES (1, 'RUNNING', 'SUCCESS', 1, 'an unrelated transaction', 'test', ?, 'ax.noop')`, ulid.Make().String())
	if err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	return func() { _ = tx.Rollback() }, nil
}

// dispatches reads every dispatch on the work stream, by task.
func dispatches(t *testing.T, conn *bus.Conn) map[int64]int {
	t.Helper()
	out := map[int64]int{}
	for _, d := range testenv.DrainDispatches(t, conn, "ax.work.exec.>") {
		out[d.Task.TaskID]++
	}
	return out
}

// TestDirectDispatchIsNotHeldByAnOpenTransaction: a task due at once is
// dispatched while another transaction that wrote a history row below it
// stays open. The relay here would hold the rows behind that hole for an
// hour (its gap grace), so only the submitter's own dispatch can get the
// task out; the relay still publishes its READY event once the hole is
// gone, and does not dispatch it again.
func TestDirectDispatchIsNotHeldByAnOpenTransaction(t *testing.T) {
	f := newDirectFixture(t, outbox.Config{GapGrace: time.Hour})
	f.start(t)
	adm := f.admin(t)
	rollback := openHole(t, adm)
	// On a failure too: an open transaction would hold the database's
	// drop at cleanup for ever.
	t.Cleanup(rollback)
	id := f.submit(t, "")
	require.NotZero(t, id)

	c, err := f.conn.JS.CreateOrUpdateConsumer(context.Background(), events.StreamWork, jetstream.ConsumerConfig{
		Durable: "test_direct", FilterSubject: "ax.work.exec.>", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	require.NoError(t, err)
	var got []events.TaskDispatched
	for m := range batch.Messages() {
		var d events.TaskDispatched
		require.NoError(t, events.Decode(m.Data(), &d))
		got = append(got, d)
		require.NoError(t, m.Ack())
	}
	require.Len(t, got, 1, "the task is dispatched while the unrelated transaction is open")
	require.Equal(t, id, got[0].TaskID)
	require.True(t, got[0].Load, "a lean dispatch")
	require.NotZero(t, got[0].CommittedNs, "it says when it was committed")
	// Marked right after JetStream stored the dispatch: the fetch may come
	// first.
	testenv.Eventually(t, 5*time.Second, "marked dispatched for the reconciler", func() bool { return f.marked(id) })
	unpublished, err := store.CountUnpublished(context.Background(), f.st.DB())
	require.NoError(t, err)
	require.Positive(t, unpublished, "the hole still holds the task's READY event back")
	rollback()
}

// TestDirectDispatchRacingRollbacksAndKillsLosesNoTaskAndDispatchesNoneTwice
// races submitters against each other and against unrelated transactions
// that write history rows and roll back (holes the relay must pass), while
// a trigger rolls back whole submission groups, one send group in eight is
// dropped after its commit (a process killed between the commit and the
// dispatch), and the submitter is stopped midway (the later submissions go
// to the relay, one by one). At the end:
//   - every task committed (and only those: no row of a rolled-back group,
//     no dispatch of a task that does not exist) is dispatched exactly once
//     (by the submitter or the relay), or, if its send was dropped, not at
//     all and found by the reconciler's query (READY, unmarked, stale);
//   - every submission answered 201 was committed.
func TestDirectDispatchRacingRollbacksAndKillsLosesNoTaskAndDispatchesNoneTwice(t *testing.T) {
	f := newDirectFixture(t, outbox.Config{})
	adm := f.admin(t)
	// A submission group with a "doomed" task fails as a whole.
	_, err := adm.Exec(`CREATE TRIGGER doom BEFORE INSERT ON tasks FOR EACH ROW
		IF NEW.payload LIKE '%doomed%' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'doomed group'; END IF`)
	require.NoError(t, err)
	var (
		mu      sync.Mutex
		dropped = map[int64]bool{}
	)
	f.sub.DropDirect(func(ids []int64) bool {
		if rand.IntN(8) != 0 {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		for _, id := range ids {
			dropped[id] = true
		}
		return true
	})
	stopSub := f.start(t)

	holesDone := make(chan struct{})
	stopHoles := make(chan struct{})
	go func() { // unrelated transactions, open a few ms, rolled back
		defer close(holesDone)
		for {
			select {
			case <-stopHoles:
				return
			default:
			}
			rollback, err := hole(adm)
			if err != nil {
				t.Errorf("unrelated transaction: %v", err)
				return
			}
			time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
			rollback()
		}
	}()

	const submitters, each = 8, 150
	var (
		wg       sync.WaitGroup
		accepted []int64
	)
	for g := range submitters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				if g == 0 && i == each/2 {
					stopSub() // later submissions are the relay's
				}
				payload := `{"n":` + strconv.Itoa(i) + `}`
				if rand.IntN(25) == 0 {
					payload = `"doomed"`
				}
				if id := f.submit(t, payload); id != 0 {
					mu.Lock()
					accepted = append(accepted, id)
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	close(stopHoles)
	<-holesDone
	testenv.Eventually(t, 30*time.Second, "relay caught up", func() bool {
		n, err := store.CountUnpublished(context.Background(), f.st.DB())
		return err == nil && n == 0
	})

	committed := testenv.Column[int64](t, f.st.DB(), `SELECT id FROM tasks`)
	require.ElementsMatch(t, accepted, committed, "exactly the accepted submissions were committed")
	require.Less(t, len(committed), submitters*each, "some groups were rolled back")
	got := dispatches(t, f.conn)
	isCommitted := map[int64]bool{}
	for _, id := range committed {
		isCommitted[id] = true
	}
	for id := range got {
		require.True(t, isCommitted[id], "task %d was dispatched but never committed", id)
	}
	require.NotEmpty(t, dropped, "some sends were dropped")
	horizon := time.Now().Add(time.Second).UnixMilli()
	stale, err := f.st.StaleReady(context.Background(), horizon, 0, nil, 10*submitters*each)
	require.NoError(t, err)
	found := map[int64]bool{}
	for _, r := range stale {
		if !f.marked(r.ID) {
			found[r.ID] = true
		}
	}
	lost := 0
	for _, id := range committed {
		switch {
		case dropped[id]:
			require.Zero(t, got[id], "task %d: its send was dropped, so nothing dispatched it", id)
			require.True(t, found[id], "task %d: the reconciler finds it", id)
			lost++
		default:
			require.Equal(t, 1, got[id], "task %d: dispatched exactly once", id)
			require.False(t, found[id], "task %d: dispatched, so the reconciler leaves it alone", id)
		}
	}
	t.Logf("%d committed, %d dispatched, %d left to the reconciler", len(committed), len(got), lost)
	require.Equal(t, lost, len(found), fmt.Sprintf("the reconciler finds only the dropped tasks: %v", found))
}

// TestDirectDispatchCarriesTheTaskTraceContext: the submitter's own
// dispatch of a task due at once carries the task's trace context in its
// traceparent header, as the relay's and the timer's do, so the run joins
// the caller's trace. A hole the relay would hold for an hour keeps the
// relay out of it.
func TestDirectDispatchCarriesTheTaskTraceContext(t *testing.T) {
	const field = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	f := newDirectFixture(t, outbox.Config{GapGrace: time.Hour})
	f.start(t)
	adm := f.admin(t)
	defer openHole(t, adm)()
	rec := httptest.NewRecorder()
	f.mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/tasks",
		strings.NewReader(`{"type":"ax.noop","traceparent":"`+field+`"}`)))
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())

	c, err := f.conn.JS.CreateOrUpdateConsumer(context.Background(), events.StreamWork, jetstream.ConsumerConfig{
		Durable: "test_direct_trace", FilterSubject: "ax.work.exec.>", AckPolicy: jetstream.AckExplicitPolicy})
	require.NoError(t, err)
	batch, err := c.Fetch(1, jetstream.FetchMaxWait(10*time.Second))
	require.NoError(t, err)
	var headers []string
	for m := range batch.Messages() {
		headers = append(headers, m.Headers().Get(events.HeaderTraceParent))
		require.NoError(t, m.Ack())
	}
	require.Equal(t, []string{field}, headers, "one dispatch, carrying the caller's trace context")
}

// postWorkflow posts a workflow and returns its answer and status.
func (f *directFixture) postWorkflow(t *testing.T, body string) (contracts.Workflow, int) {
	t.Helper()
	rec := httptest.NewRecorder()
	f.mux.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/workflows", strings.NewReader(body)))
	var wf contracts.Workflow
	if rec.Code == http.StatusCreated || rec.Code == http.StatusOK {
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &wf), rec.Body.String())
	}
	return wf, rec.Code
}

// TestDirectDispatchOfAWorkflowsSteps: the steps of a workflow due at
// once (no parent, no delay) are dispatched by the submitter right after
// the commit, as single submissions are, while an unrelated transaction
// holds the relay back (its gap grace is an hour); a step that waits for
// a parent or for its delay is not. Creating it again (same name and
// biz_key) dispatches nothing more. Once the transaction commits the
// relay publishes every step's event and dispatches none of them again.
func TestDirectDispatchOfAWorkflowsSteps(t *testing.T) {
	f := newDirectFixture(t, outbox.Config{GapGrace: time.Hour})
	f.start(t)
	adm := f.admin(t)
	tx, err := adm.BeginTx(context.Background(), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	_, err = tx.Exec(`INSERT INTO task_history (task_id, from_status, to_status, attempt, reason, actor, event_id, task_type)
		VALUES (1, 'RUNNING', 'SUCCESS', 1, 'an unrelated transaction', 'test', ?, 'ax.noop')`, ulid.Make().String())
	require.NoError(t, err)

	const body = `{"name":"direct","biz_key":"order-7","steps":[
		{"key":"a","type":"ax.noop"},
		{"key":"b","type":"ax.noop"},
		{"key":"later","type":"ax.noop","delay":"30m"},
		{"key":"child","type":"ax.noop","depends_on":["a"]}]}`
	wf, code := f.postWorkflow(t, body)
	require.Equal(t, http.StatusCreated, code)
	ids := map[string]int64{}
	for _, st := range wf.Steps {
		id, err := strconv.ParseInt(st.TaskID, 10, 64)
		require.NoError(t, err)
		ids[st.Key] = id
	}
	require.Len(t, ids, 4)
	testenv.Eventually(t, 10*time.Second, "the steps due at once marked dispatched", func() bool {
		return f.marked(ids["a"]) && f.marked(ids["b"])
	})
	again, code := f.postWorkflow(t, body)
	require.Equal(t, http.StatusOK, code, "the same name and biz_key: the workflow that exists")
	require.Equal(t, wf.ID, again.ID)
	unpublished, err := store.CountUnpublished(context.Background(), f.st.DB())
	require.NoError(t, err)
	require.Positive(t, unpublished, "the hole still holds the steps' events back")

	require.NoError(t, tx.Commit())
	testenv.Eventually(t, 30*time.Second, "relay caught up", func() bool {
		n, err := store.CountUnpublished(context.Background(), f.st.DB())
		return err == nil && n == 0
	})
	got := dispatches(t, f.conn)
	require.Equal(t, map[int64]int{ids["a"]: 1, ids["b"]: 1}, got,
		"each step due at once dispatched once; the delayed step and the child not at all")
	require.False(t, f.marked(ids["later"]))
	require.False(t, f.marked(ids["child"]))
}
