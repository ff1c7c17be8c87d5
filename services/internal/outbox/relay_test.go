package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/oklog/ulid/v2"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/natsembed"
	"github.com/axsched/ax/services/internal/outbox"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

var ids atomic.Int64

func create(t testing.TB, st *store.Store) {
	t.Helper()
	_, _, err := st.CreateTask(context.Background(), store.NewTask{
		ID: ids.Add(1), Type: "ax.noop", Priority: contracts.PriorityNormal, Status: contracts.StatusReady,
		NextRunTimeMs: 1, MaxRetries: 3, TimeoutMs: 1000, Reason: "test",
	})
	if err != nil {
		t.Error(err)
	}
}

// streamEventIDs returns the event IDs on AX_EVENTS (of transfers
// travelling alone or together) with how often each occurs.
func streamEventIDs(t *testing.T, js jetstream.JetStream) map[string]int {
	out := map[string]int{}
	for _, e := range testenv.StreamEvents(t, js) {
		out[e.ID]++
	}
	return out
}

// streamOrder returns the task IDs of the events on AX_EVENTS, in stream
// order.
func streamOrder(t *testing.T, js jetstream.JetStream) []string {
	var out []string
	for _, e := range testenv.StreamEvents(t, js) {
		out = append(out, e.TaskID)
	}
	return out
}

func historyEventIDs(t *testing.T, st *store.Store) map[string]bool {
	t.Helper()
	rows, err := st.DB().Query(`SELECT event_id FROM task_history`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var id string
		require.NoError(t, rows.Scan(&id))
		out[id] = true
	}
	return out
}

func backlog(t *testing.T, st *store.Store) int64 {
	t.Helper()
	n, err := store.CountUnpublished(context.Background(), st.DB())
	require.NoError(t, err)
	return n
}

// TestConcurrentProducersLoseNoEvent is the gap test: rows committed out of
// ID order, and transactions rolled back after taking history IDs (holes
// that never fill), while two relays run: every committed transfer reaches
// the stream, once.
func TestConcurrentProducersLoseNoEvent(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 transactions")
	}
	st, _ := testenv.Store(t)
	conn := testenv.NATS(t)
	logger := testenv.Logger(t)

	ctx, cancel := context.WithCancel(context.Background())
	var relays sync.WaitGroup
	for range 2 {
		r := outbox.New(outbox.Config{Batch: 200, GapGrace: 50 * time.Millisecond}, st, conn, logger)
		relays.Go(func() { _ = r.Run(ctx) })
	}

	const producers, each = 8, 1250
	start := time.Now()
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for range each {
				create(t, st)
			}
		})
	}
	var rolledBack atomic.Int64
	wg.Go(func() {
		for range 40 {
			rollbackHistory(t, st, 3)
			rolledBack.Add(3)
			time.Sleep(20 * time.Millisecond)
		}
	})
	wg.Wait()
	produced := time.Since(start)
	testenv.Eventually(t, 60*time.Second, "outbox drained", func() bool { return backlog(t, st) == 0 })
	cancel()
	relays.Wait()
	t.Logf("%d transfers by %d producers in %s (%.0f/s), %d history IDs rolled back, relayed by two relays",
		producers*each, producers, produced, float64(producers*each)/produced.Seconds(), rolledBack.Load())

	got := streamEventIDs(t, conn.JS)
	want := historyEventIDs(t, st)
	require.Len(t, want, producers*each)
	require.Len(t, got, producers*each, "exactly one stream message per transfer")
	for id, n := range got {
		require.Equal(t, 1, n, "event %s stored %d times", id, n)
		require.True(t, want[id], "event %s has no history row", id)
	}
}

// TestRelayCrashRedeliversWithoutDuplicates kills the relay (returns an
// error, so the transaction rolls back) before and after publishing; a
// restarted relay delivers everything, and the stream holds each event
// once: with every transfer alone, and with transfers travelling together
// (a successor reading the same rows groups them the same way).
func TestRelayCrashRedeliversWithoutDuplicates(t *testing.T) {
	for _, perMessage := range []int{1, outbox.EventsPerMessageDefault} {
		t.Run(fmt.Sprintf("%d per message", perMessage), func(t *testing.T) {
			st, conn := withTasks(t, 100)
			ctx := context.Background()
			crashedPasses(t, st, conn, perMessage, 0)

			r := outbox.New(outbox.Config{EventsPerMessage: perMessage}, st, conn, testenv.Logger(t))
			sent := testutil.ToFloat64(metrics.EventMessages)
			n, err := r.RunOnce(ctx)
			require.NoError(t, err)
			require.Equal(t, 100, n)
			require.Zero(t, backlog(t, st))
			require.Equal(t, float64((100+perMessage-1)/perMessage), testutil.ToFloat64(metrics.EventMessages)-sent,
				"ax_event_messages_total counts the messages of the pass")

			got := streamEventIDs(t, conn.JS)
			require.Len(t, got, 100)
			for id, c := range got {
				require.Equal(t, 1, c, "event %s stored %d times", id, c)
			}
			require.Equal(t, historyEventIDs(t, st), keys(got))
		})
	}
}

// TestASuccessorThatReadsMoreMayRepeatSome: a relay killed after storing
// its messages, whose successor reads more rows than it did (transfers
// committed in between), groups the transfers differently: every event
// reaches the stream, and only what the killed relay stored may be there
// twice (consumers tell repeats by event ID). Within the same process a
// failed publish is tried again with the same messages (below).
func TestASuccessorThatReadsMoreMayRepeatSome(t *testing.T) {
	st, conn := withTasks(t, 100)
	ctx := context.Background()
	stored := crashedPasses(t, st, conn, outbox.EventsPerMessageDefault, 30)

	r := outbox.New(outbox.Config{}, st, conn, testenv.Logger(t))
	n, err := r.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 130, n)
	got := streamEventIDs(t, conn.JS)
	require.Equal(t, historyEventIDs(t, st), keys(got), "every transfer on the stream")
	twice := 0
	for id, c := range got {
		if c > 1 {
			require.True(t, stored[id], "event %s repeated, though the killed relay never stored it", id)
			twice++
		}
	}
	t.Logf("%d of the %d events the killed relay stored are on the stream twice", twice, len(stored))
}

// TestAPublishTriedAgainSendsTheSameMessages: a publish that fails after
// JetStream stored its messages is tried again with the same messages,
// though the pass now reads more rows, so the stream drops them as
// repeats: each event once.
func TestAPublishTriedAgainSendsTheSameMessages(t *testing.T) {
	st, conn := withTasks(t, 100)
	ctx := context.Background()
	r := failingOnceAfterStoring(t, st, conn)
	_, err := r.RunOnce(ctx)
	require.Error(t, err)
	require.EqualValues(t, 100, backlog(t, st))
	for range 30 {
		create(t, st)
	}
	n, err := r.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 130, n)
	got := streamEventIDs(t, conn.JS)
	require.Equal(t, historyEventIDs(t, st), keys(got))
	for id, c := range got {
		require.Equal(t, 1, c, "event %s stored %d times", id, c)
	}
}

// crashedPasses runs a relay pass over the history that is killed between
// reading and publishing, then after publishing the first half of its
// messages, then after publishing all, and checks each left the cursor
// where it was. Then it commits more transfers. It returns the event IDs
// the killed passes stored.
func crashedPasses(t *testing.T, st *store.Store, conn *bus.Conn, perMessage, more int) map[string]bool {
	t.Helper()
	ctx := context.Background()
	crash := errors.New("relay killed")
	gaps := store.NewHistoryGaps(0, 0)
	cursor, err := st.RelayCursor(ctx)
	require.NoError(t, err)
	before := backlog(t, st)
	_, err = st.RelayHistory(ctx, cursor, 1000, gaps, func(context.Context, []store.OutboxRow) error { return crash })
	require.ErrorIs(t, err, crash)
	require.Equal(t, before, backlog(t, st))
	require.Empty(t, streamEventIDs(t, conn.JS))

	for _, half := range []bool{true, false} {
		_, err = st.RelayHistory(ctx, cursor, 1000, gaps, func(ctx context.Context, rows []store.OutboxRow) error {
			msgs := outbox.EventMessages(rows, perMessage)
			if half {
				msgs = msgs[:(len(msgs)+1)/2]
			}
			require.NoError(t, bus.PublishBatch(ctx, conn.JS, msgs))
			return crash
		})
		require.ErrorIs(t, err, crash)
		require.Equal(t, before, backlog(t, st), "the cursor does not move in a crashed pass")
	}
	stored := keys(streamEventIDs(t, conn.JS))
	require.Len(t, stored, int(before))
	for range more {
		create(t, st)
	}
	return stored
}

// withTasks gives a store and a NATS connection of the test's own, with n
// tasks created (and their READY transfers in history).
func withTasks(t *testing.T, n int) (*store.Store, *bus.Conn) {
	t.Helper()
	st, _ := testenv.Store(t)
	conn := testenv.NATS(t)
	for range n {
		create(t, st)
	}
	return st, conn
}

func keys(m map[string]int) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// insertHistory writes a task_history row by hand, the way a transfer
// writes it.
func insertHistory(ctx context.Context, t *testing.T, q interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, id int64) int64 {
	t.Helper()
	idCol, idArg := "", []any{}
	if id > 0 {
		idCol, idArg = "id, ", []any{id}
	}
	args := append(idArg, ids.Add(1), "", "READY", 0, "by hand", "test", ulid.Make().String(), time.Now().UTC(), "ax.noop", 1, 1)
	res, err := q.ExecContext(ctx, `INSERT INTO task_history (`+idCol+`task_id, from_status, to_status, attempt, reason,
		actor, event_id, created_at, task_type, priority, next_run_time) VALUES (?`+strings.Repeat(", ?", len(args)-1)+`)`, args...)
	require.NoError(t, err)
	got, err := res.LastInsertId()
	require.NoError(t, err)
	return got
}

// rollbackHistory takes n history IDs in a transaction that rolls back: a
// hole in the IDs that never fills.
func rollbackHistory(t *testing.T, st *store.Store, n int) {
	ctx := context.Background()
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		t.Error(err)
		return
	}
	for range n {
		insertHistory(ctx, t, tx, 0)
	}
	if err := tx.Rollback(); err != nil {
		t.Error(err)
	}
}

// TestOpenTransactionHoldsTheRowsBehindIt: a transaction that inserted a
// history row and has not committed holds back a later row that already
// committed, without the relay waiting on it; once it commits, both go out
// in ID order.
func TestOpenTransactionHoldsTheRowsBehindIt(t *testing.T) {
	st, _ := testenv.Store(t)
	conn := testenv.NATS(t)
	ctx := context.Background()
	r := outbox.New(outbox.Config{GapGrace: time.Minute}, st, conn, testenv.Logger(t))

	tx, err := st.DB().BeginTx(ctx, nil)
	require.NoError(t, err)
	// A failed test must not leave the transaction holding the database.
	t.Cleanup(func() { _ = tx.Rollback() })
	first := insertHistory(ctx, t, tx, 0)
	second := insertHistory(ctx, t, st.DB(), 0)
	require.Greater(t, second, first)

	n, err := r.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "nothing published past an open transaction's row")
	require.Empty(t, streamOrder(t, conn.JS))

	var firstTask, secondTask string
	require.NoError(t, tx.QueryRowContext(ctx, `SELECT task_id FROM task_history WHERE id = ?`, first).Scan(&firstTask))
	require.NoError(t, st.DB().QueryRow(`SELECT task_id FROM task_history WHERE id = ?`, second).Scan(&secondTask))
	require.NoError(t, tx.Commit())
	n, err = r.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Equal(t, []string{firstTask, secondTask}, streamOrder(t, conn.JS))
}

// TestAStoppedHolderHoldsEventsOnlyUntilItsLeaseLapses: one relay at a
// time walks the history. A holder that stops (killed, frozen) without
// releasing its lease holds events back only until the lease lapses; a
// standby then takes over from the stored cursor, and when the old holder
// comes back it is fenced: it neither publishes nor moves the cursor.
func TestAStoppedHolderHoldsEventsOnlyUntilItsLeaseLapses(t *testing.T) {
	st, _ := testenv.Store(t)
	conn := testenv.NATS(t)
	ctx := context.Background()
	cfg := outbox.Config{LeaseTTL: 600 * time.Millisecond}
	first := outbox.New(withHolder(cfg, "first"), st, conn, testenv.Logger(t))
	second := outbox.New(withHolder(cfg, "second"), st, conn, testenv.Logger(t))
	for range 10 {
		create(t, st)
	}
	// The lease first takes runs from inside RunOnce, so it cannot lapse
	// before this moment plus the TTL (less the database clock's
	// millisecond truncation).
	lapsed := time.Now().Add(cfg.LeaseTTL - time.Millisecond)
	n, err := first.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 10, n)
	require.Equal(t, "first", leaseHolder(t, st))

	// first stops here, holding the lease.
	for range 5 {
		create(t, st)
	}
	n, err = second.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "a standby does not walk the history while the lease is held")
	testenv.Eventually(t, 10*time.Second, "the standby takes over once the lease lapses", func() bool {
		n, err := second.RunOnce(ctx)
		require.NoError(t, err)
		return n == 5
	})
	require.False(t, time.Now().Before(lapsed), "not before the lease lapsed")
	require.Equal(t, "second", leaseHolder(t, st))
	require.Zero(t, backlog(t, st))

	// first comes back: fenced off.
	create(t, st)
	n, err = first.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "the old holder finds the lease taken and stands by")
	require.EqualValues(t, 1, backlog(t, st), "and does not move the cursor")
	n, err = second.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)

	got := streamEventIDs(t, conn.JS)
	require.Len(t, got, 16)
	for id, c := range got {
		require.Equal(t, 1, c, "event %s stored %d times", id, c)
	}
}

// TestStandbyWakesTheHolder: transfers committed in a process whose relay
// is on standby are published at once by the holder in another process,
// woken over NATS, not on its next poll.
func TestStandbyWakesTheHolder(t *testing.T) {
	st, dsn := testenv.Store(t)
	conn := testenv.NATS(t)
	other, err := store.Open(context.Background(), dsn, store.Options{Actor: "other"})
	require.NoError(t, err)
	t.Cleanup(func() { other.Close() })
	otherConn, err := bus.Connect(context.Background(), conn.URL, "other")
	require.NoError(t, err)
	t.Cleanup(otherConn.Close)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	t.Cleanup(cancel)
	slow := outbox.Config{PollInterval: time.Hour}
	holder := outbox.New(withHolder(slow, "holder"), st, conn, testenv.Logger(t))
	wg.Go(func() { _ = holder.Run(ctx) })
	testenv.Eventually(t, 10*time.Second, "the first relay holds the lease", func() bool {
		return leaseHolder(t, st) == "holder"
	})
	standby := outbox.New(withHolder(slow, "standby"), other, otherConn, testenv.Logger(t))
	wg.Go(func() { _ = standby.Run(ctx) })
	time.Sleep(100 * time.Millisecond) // both settled into waiting

	for range 3 {
		create(t, other)
	}
	testenv.Eventually(t, 5*time.Second, "the holder published the other process's events", func() bool {
		return len(streamEventIDs(t, conn.JS)) == 3
	})
	require.Equal(t, "holder", leaseHolder(t, st))
}

func withHolder(cfg outbox.Config, holder string) outbox.Config {
	cfg.Holder = holder
	return cfg
}

func leaseHolder(t *testing.T, st *store.Store) string {
	t.Helper()
	var holder string
	require.NoError(t, st.DB().QueryRow(`SELECT holder FROM event_relay WHERE name = 'task_history'`).Scan(&holder))
	return holder
}

// TestRolledBackIDsArePassedAndLateRowsStillGoOut: a hole is held for the
// grace, then passed; a row that appears in a passed hole afterwards (a
// statement that took its IDs and stalled) is still published.
func TestRolledBackIDsArePassedAndLateRowsStillGoOut(t *testing.T) {
	st, _ := testenv.Store(t)
	conn := testenv.NATS(t)
	ctx := context.Background()
	r := outbox.New(outbox.Config{GapGrace: 200 * time.Millisecond}, st, conn, testenv.Logger(t))

	before := insertHistory(ctx, t, st.DB(), 0)
	rollbackHistory(t, st, 3) // IDs before+1 .. before+3 never commit
	after := insertHistory(ctx, t, st.DB(), 0)
	require.Equal(t, before+4, after, "the rolled-back IDs are a hole")

	n, err := r.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the row behind the hole waits for the grace")
	require.EqualValues(t, 1, backlog(t, st))
	testenv.Eventually(t, 10*time.Second, "the hole is passed", func() bool {
		n, err := r.RunOnce(ctx)
		require.NoError(t, err)
		return n == 1
	})
	require.Zero(t, backlog(t, st))

	// A row shows up in the passed hole after all.
	require.Equal(t, before+2, insertHistory(ctx, t, st.DB(), before+2))
	n, err = r.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n, "the late row is published")
	n, err = r.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "and only once")

	got := streamEventIDs(t, conn.JS)
	require.Len(t, got, 3)
	require.Equal(t, historyEventIDs(t, st), func() map[string]bool {
		m := map[string]bool{}
		for id := range got {
			m[id] = true
		}
		return m
	}())
}

// TestRowsFromBeforeTheHistoryRelayArePassedOver: history rows written by
// a version that still copied events into the outbox (no task_type) were
// published from the outbox; the history relay moves past them without
// publishing them again, and publishes the rows around them.
func TestRowsFromBeforeTheHistoryRelayArePassedOver(t *testing.T) {
	st, _ := testenv.Store(t)
	conn := testenv.NATS(t)
	ctx := context.Background()
	r := outbox.New(outbox.Config{}, st, conn, testenv.Logger(t))

	first := insertHistory(ctx, t, st.DB(), 0)
	legacy := insertHistory(ctx, t, st.DB(), 0)
	_, err := st.DB().Exec(`UPDATE task_history SET task_type = '' WHERE id = ?`, legacy)
	require.NoError(t, err)
	last := insertHistory(ctx, t, st.DB(), 0)

	n, err := r.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.Zero(t, backlog(t, st))
	var want []string
	for _, id := range []int64{first, last} {
		var task string
		require.NoError(t, st.DB().QueryRow(`SELECT task_id FROM task_history WHERE id = ?`, id).Scan(&task))
		want = append(want, task)
	}
	require.Equal(t, want, streamOrder(t, conn.JS))
	var cursor int64
	require.NoError(t, st.DB().QueryRow(`SELECT last_id FROM event_relay WHERE name = 'task_history'`).Scan(&cursor))
	require.Equal(t, last, cursor, "the cursor is past the legacy row")
}

// TestRelayLosesNothingWhenNATSRestarts: producers commit transfers in
// batches (so relay passes publish fast batches of many events) while the
// NATS server restarts four times under the relay; once it is back every
// committed transfer is on the stream exactly once — batches cut off by a
// restart are published again and the stream drops what it already had.
func TestRelayLosesNothingWhenNATSRestarts(t *testing.T) {
	st, _ := testenv.Store(t)
	srv, conn := testenv.NATSServer(t)
	logger := testenv.Logger(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := outbox.New(outbox.Config{Batch: 500, GapGrace: 50 * time.Millisecond}, st, conn, logger)
	done := make(chan struct{})
	go func() { defer close(done); _ = r.Run(ctx) }()

	const producers, batches, each = 4, 60, 50
	var wg sync.WaitGroup
	for range producers {
		wg.Go(func() {
			for range batches {
				nts := make([]store.NewTask, each)
				for i := range nts {
					nts[i] = store.NewTask{ID: ids.Add(1), Type: "ax.noop", Priority: contracts.PriorityNormal,
						Status: contracts.StatusReady, NextRunTimeMs: 1, MaxRetries: 3, TimeoutMs: 1000, Reason: "test"}
				}
				if _, err := st.CreateTasks(context.Background(), nts); err != nil {
					t.Error(err)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	for range 4 {
		time.Sleep(100 * time.Millisecond)
		srv.Restart(t)
	}
	wg.Wait()
	testenv.Eventually(t, 60*time.Second, "every transfer relayed", func() bool { return backlog(t, st) == 0 })
	cancel()
	<-done

	got := streamEventIDs(t, conn.JS)
	want := historyEventIDs(t, st)
	require.Equal(t, producers*batches*each, len(want))
	require.Equal(t, len(want), len(got), "one stream message per transfer")
	for id, n := range got {
		require.Equal(t, 1, n, "event %s stored %d times", id, n)
		require.True(t, want[id], "event %s has no history row", id)
	}
}

// TestARelayKeepsWithinTheServersMaxPayload: a NATS server that accepts
// messages of at most 8 KiB (its max_payload) gets every transfer of
// tasks whose reasons are long, in messages it accepts; with ax's own
// bound (64 KiB) the pass would be refused again and again.
func TestARelayKeepsWithinTheServersMaxPayload(t *testing.T) {
	st, _ := testenv.Store(t)
	_, conn := testenv.NATSServerWith(t, natsembed.Config{MaxPayload: 8 << 10})
	ctx := context.Background()
	createWithLongReasons(t, st, 100)
	r := outbox.New(outbox.Config{}, st, conn, testenv.Logger(t))
	n, err := r.RunOnce(ctx)
	require.NoError(t, err, "the pass is published")
	require.Equal(t, 100, n)
	require.Equal(t, historyEventIDs(t, st), keys(streamEventIDs(t, conn.JS)), "every transfer on the stream")
}

// TestAPassRefusedForItsSizeIsGroupedAfresh: a pass whose publish failed
// is tried again with the same messages, but not when the server refuses
// them for their size (it came back with a smaller max_payload): the
// rows are then grouped within the new bound, and the relay goes on.
func TestAPassRefusedForItsSizeIsGroupedAfresh(t *testing.T) {
	st, _ := testenv.Store(t)
	host, conn := testenv.NATSServer(t)
	ctx := context.Background()
	createWithLongReasons(t, st, 40)
	r := failingOnceAfterStoring(t, st, conn)
	_, err := r.RunOnce(ctx)
	require.Error(t, err, "the first publish fails after JetStream stored it")

	host.RestartWith(t, func(c *natsembed.Config) { c.MaxPayload = 8 << 10 })
	testenv.Eventually(t, 10*time.Second, "reconnected to the smaller server", func() bool {
		return conn.NC.IsConnected() && conn.NC.MaxPayload() == 8<<10
	})
	var n int
	for try := range 3 {
		if n, err = r.RunOnce(ctx); err == nil {
			break
		}
		t.Logf("pass %d: %v", try+1, err)
	}
	require.NoError(t, err, "the relay goes on within the new bound")
	require.Equal(t, 40, n)
	require.Equal(t, historyEventIDs(t, st), keys(streamEventIDs(t, conn.JS)), "every transfer on the stream")
}

// createWithLongReasons creates n READY tasks whose transfers take ~1.5 KB
// each (their reasons are long).
func createWithLongReasons(t *testing.T, st *store.Store, n int) {
	t.Helper()
	reason := strings.Repeat("a long reason ", 110)
	for range n {
		_, _, err := st.CreateTask(context.Background(), store.NewTask{
			ID: ids.Add(1), Type: "ax.noop", Priority: contracts.PriorityNormal, Status: contracts.StatusReady,
			NextRunTimeMs: 1, MaxRetries: 3, TimeoutMs: 1000, Reason: reason,
		})
		require.NoError(t, err)
	}
}

// failingOnceAfterStoring is a relay whose first publish fails after
// JetStream stored its messages (their acknowledgements lost).
func failingOnceAfterStoring(t *testing.T, st *store.Store, conn *bus.Conn) *outbox.Relay {
	r := outbox.New(outbox.Config{}, st, conn, testenv.Logger(t))
	failed := false
	outbox.InjectPublishFaults(r, func(acked bool) error {
		if acked && !failed {
			failed = true
			return errors.New("acknowledgements lost")
		}
		return nil
	})
	return r
}
