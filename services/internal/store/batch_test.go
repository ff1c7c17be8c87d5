package store_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
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

// batchTask describes a task for CreateTasks with a fresh ID; an empty key
// means no biz_key.
func batchTask(key string) store.NewTask {
	nextID++
	nt := store.NewTask{
		ID: nextID, Type: "ax.noop", Priority: contracts.PriorityNormal, Payload: []byte(`{"n":1}`),
		Status: contracts.StatusReady, NextRunTimeMs: time.Now().UnixMilli(), MaxRetries: 3, TimeoutMs: 1000,
		Reason: "batch test",
	}
	if key != "" {
		nt.BizKey = &key
	}
	return nt
}

func batchOf(keys ...string) []store.NewTask {
	nts := make([]store.NewTask, len(keys))
	for i, k := range keys {
		nts[i] = batchTask(k)
	}
	return nts
}

// tableCounts is the whole observable state of a store: tasks, history
// rows, and events waiting to be published (history rows' events, read by
// a real relay pass, and outbox rows).
func tableCounts(t *testing.T, st *store.Store) [3]int {
	t.Helper()
	var c [3]int
	for i, table := range []string{"tasks", "task_history", "outbox"} {
		require.NoError(t, st.DB().QueryRow("SELECT COUNT(*) FROM "+table).Scan(&c[i]))
	}
	c[2] += len(relayAll(t, st))
	return c
}

func TestCreateTasksWritesTaskHistoryAndEventForEach(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	nts := make([]store.NewTask, 1000)
	for i := range nts {
		key := ""
		if i%2 == 0 {
			key = fmt.Sprintf("order-%d", i)
		}
		nts[i] = batchTask(key)
	}

	start := time.Now()
	res, err := st.CreateTasks(ctx, nts)
	elapsed := time.Since(start)
	require.NoError(t, err)
	t.Logf("created %d tasks in one transaction in %s (%.0f tasks/s)", len(nts), elapsed, float64(len(nts))/elapsed.Seconds())

	require.Len(t, res, len(nts))
	for i, r := range res {
		require.False(t, r.Deduplicated, "item %d", i)
		require.Equal(t, nts[i].ID, r.Task.ID, "results follow the input order")
		require.Equal(t, contracts.StatusReady, r.Task.Status)
	}
	require.Equal(t, [3]int{1000, 1000, 1000}, tableCounts(t, st))
	var copied int
	require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM outbox`).Scan(&copied))
	require.Zero(t, copied, "transfer events are published from history, not copied into the outbox")
	evs := relayAll(t, st)
	require.Len(t, evs, 1000, "every history row has its event")
	for i, e := range evs {
		h, err := st.History(ctx, nts[i].ID)
		require.NoError(t, err)
		require.Equal(t, h[0].EventID, e.EventID, "same event ID as the history row")
		require.Equal(t, strconv.FormatInt(nts[i].ID, 10), e.CorrelationID, "events follow the history order")
	}

	got, err := st.GetTask(ctx, nts[10].ID)
	require.NoError(t, err)
	require.Equal(t, res[10].Task, got, "the answer is what a later read returns")
}

// TestCreateTasksEventsMatchCreateTask keeps the multi-row history and
// insert equal to what CreateTask writes for one task, as the relay
// publishes it.
func TestCreateTasksEventsMatchCreateTask(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	one := newTask(t, st, nil)
	res, err := st.CreateTasks(ctx, batchOf("k"))
	require.NoError(t, err)
	many := res[0].Task

	type outboxRow struct {
		subject, eventType string
		event              events.TaskTransferred
	}
	relayed := map[string]store.OutboxRow{}
	for _, e := range relayAll(t, st) {
		relayed[e.CorrelationID] = e
	}
	load := func(id int64) (store.HistoryRow, outboxRow) {
		h, err := st.History(ctx, id)
		require.NoError(t, err)
		require.Len(t, h, 1)
		e, ok := relayed[strconv.FormatInt(id, 10)]
		require.True(t, ok, "task %d has an event", id)
		o := outboxRow{subject: e.Subject, eventType: e.EventType}
		require.NoError(t, json.Unmarshal(e.Payload, &o.event))
		return h[0], o
	}
	h1, o1 := load(one.ID)
	hN, oN := load(many.ID)
	require.Equal(t, o1.subject, oN.subject)
	require.Equal(t, o1.eventType, oN.eventType)
	require.Equal(t, hN.EventID, oN.event.EventID)
	require.Equal(t, events.TaskTransferred{
		EventID: hN.EventID, TaskID: many.ID, Type: "ax.noop", From: contracts.StatusNone, To: contracts.StatusReady,
		Priority: contracts.PriorityNormal, NextRunTimeMs: many.NextRunTimeMs, Reason: "batch test", Actor: "test",
		At: oN.event.At,
	}, oN.event)
	require.WithinDuration(t, hN.At, oN.event.At, time.Millisecond)
	require.Equal(t, h1.Actor, hN.Actor)
	require.Equal(t, h1.From, hN.From)
	require.Equal(t, h1.To, hN.To)
}

// TestCreateTasksSplitsLargePayloads sends what a full 16 MiB batch body can
// carry, with payloads that double when escaped: the statements must stay
// under max_allowed_packet.
func TestCreateTasksSplitsLargePayloads(t *testing.T) {
	st, _ := testenv.Store(t)
	payload := []byte(`"` + strings.Repeat(`\"`, 32<<10) + `"`) // a JSON string of 64 KiB
	nts := make([]store.NewTask, 16<<20/len(payload))
	for i := range nts {
		nts[i] = batchTask("")
		nts[i].Payload = payload
	}
	res, err := st.CreateTasks(context.Background(), nts)
	require.NoError(t, err)
	require.Len(t, res, len(nts))
	require.Equal(t, [3]int{len(nts), len(nts), len(nts)}, tableCounts(t, st))
	got, err := st.GetTask(context.Background(), nts[len(nts)-1].ID)
	require.NoError(t, err)
	require.Equal(t, payload, got.Payload)
}

func TestCreateTasksDeduplicates(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	old := "old"
	existing := newTask(t, st, &old)

	nts := batchOf("old", "new", "new", "", "other", "old")
	res, err := st.CreateTasks(ctx, nts)
	require.NoError(t, err)
	require.Len(t, res, len(nts))

	wantID := []int64{existing.ID, nts[1].ID, nts[1].ID, nts[3].ID, nts[4].ID, existing.ID}
	wantDedup := []bool{true, false, true, false, false, true}
	for i, r := range res {
		require.Equal(t, wantID[i], r.Task.ID, "item %d", i)
		require.Equal(t, wantDedup[i], r.Deduplicated, "item %d", i)
	}
	require.Equal(t, "old", *res[0].Task.BizKey)
	require.Equal(t, existing.CreatedAt, res[0].Task.CreatedAt, "the existing task is returned as stored")

	require.Equal(t, [3]int{4, 4, 4}, tableCounts(t, st), "one existing task and three new ones")
	for _, i := range []int{0, 2, 5} {
		require.Equal(t, counts{}, countRows(t, st, nts[i].ID), "a duplicate writes no history or event")
	}

	// The same batch again creates nothing.
	again, err := st.CreateTasks(ctx, batchOf("old", "new", "other"))
	require.NoError(t, err)
	for i, r := range again {
		require.True(t, r.Deduplicated, "item %d", i)
	}
	require.Equal(t, []int64{existing.ID, nts[1].ID, nts[4].ID}, []int64{again[0].Task.ID, again[1].Task.ID, again[2].Task.ID})
	require.Equal(t, [3]int{4, 4, 4}, tableCounts(t, st))
}

func TestCreateTasksBizKeyComparesBytes(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	res, err := st.CreateTasks(ctx, batchOf("a", "A", "a "))
	require.NoError(t, err)
	ids := map[int64]bool{}
	for _, r := range res {
		require.False(t, r.Deduplicated)
		ids[r.Task.ID] = true
	}
	require.Len(t, ids, 3, "keys differing in case or trailing space are distinct")

	again, err := st.CreateTasks(ctx, batchOf("a ", "A", "a"))
	require.NoError(t, err)
	require.Equal(t, res[2].Task.ID, again[0].Task.ID)
	require.Equal(t, res[1].Task.ID, again[1].Task.ID)
	require.Equal(t, res[0].Task.ID, again[2].Task.ID)
	require.Equal(t, [3]int{3, 3, 3}, tableCounts(t, st))
}

func TestCreateTasksFailureWritesNothing(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()

	// The last item's type does not fit tasks.task_type, so the transaction
	// fails after the first chunk of task rows was written.
	nts := make([]store.NewTask, 700)
	for i := range nts {
		nts[i] = batchTask(fmt.Sprintf("k%d", i))
	}
	nts[len(nts)-1].Type = strings.Repeat("x", 300)
	_, err := st.CreateTasks(ctx, nts)
	require.Error(t, err)
	require.Equal(t, [3]int{}, tableCounts(t, st))

	// Refused before any SQL runs.
	bad := batchOf("x", "y")
	bad[1].Status = contracts.StatusRunning
	_, err = st.CreateTasks(ctx, bad)
	require.ErrorIs(t, err, store.ErrIllegalTransition)
	twice := batchOf("x", "y")
	twice[1].ID = twice[0].ID
	_, err = st.CreateTasks(ctx, twice)
	require.Error(t, err)
	require.Equal(t, [3]int{}, tableCounts(t, st))

	res, err := st.CreateTasks(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, res)
}

func TestCreateTasksIDCollisionWritesNothing(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	existing := newTask(t, st, nil)
	before := tableCounts(t, st)

	for _, key := range []string{"", "fresh"} {
		nts := batchOf("a", key, "b")
		nts[1].ID = existing.ID
		_, err := st.CreateTasks(ctx, nts)
		require.ErrorIs(t, err, store.ErrIDTaken, "key %q", key)
		require.Equal(t, before, tableCounts(t, st))
	}
}

// TestConcurrentBatchesCreateEachKeyOnce races batches holding the same keys
// in different orders: every key is created exactly once, and every batch
// answers with the same task for it.
func TestConcurrentBatchesCreateEachKeyOnce(t *testing.T) {
	st, _ := testenv.Store(t)
	const racers, keys = 10, 100
	var mu sync.Mutex
	batches := make([][]store.NewTask, racers)
	for r := range batches {
		ks := make([]string, keys)
		for i := range ks {
			ks[i] = fmt.Sprintf("key-%03d", i)
		}
		rand.Shuffle(len(ks), func(i, j int) { ks[i], ks[j] = ks[j], ks[i] })
		batches[r] = batchOf(ks...)
	}

	created := map[string]int{}
	taskOf := map[string]int64{}
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, racers)
	for r := range racers {
		wg.Go(func() {
			<-start
			res, err := st.CreateTasks(context.Background(), batches[r])
			for attempt := 0; store.IsDeadlock(err) && attempt < 5; attempt++ {
				res, err = st.CreateTasks(context.Background(), batches[r])
			}
			errs[r] = err
			mu.Lock()
			defer mu.Unlock()
			for _, x := range res {
				key := *x.Task.BizKey
				if !x.Deduplicated {
					created[key]++
				}
				if id, ok := taskOf[key]; ok && id != x.Task.ID {
					errs[r] = errors.Join(errs[r], fmt.Errorf("key %s answered with tasks %d and %d", key, id, x.Task.ID))
				}
				taskOf[key] = x.Task.ID
			}
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Len(t, created, keys)
	for k, n := range created {
		require.Equal(t, 1, n, "key %s created %d times", k, n)
	}
	require.Equal(t, [3]int{keys, keys, keys}, tableCounts(t, st))
}
