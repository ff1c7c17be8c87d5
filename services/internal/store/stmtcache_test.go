package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

func TestSizeClasses(t *testing.T) {
	for _, c := range []struct{ n, up, down int }{
		{1, 1, 1}, {8, 8, 8}, {9, 12, 8}, {12, 12, 12}, {13, 16, 12}, {100, 128, 96},
		{250, 256, 192}, {500, 512, 384}, {512, 512, 512}, {600, 600, 512},
	} {
		require.Equal(t, c.up, store.ClassUp(c.n), "up %d", c.n)
		require.Equal(t, c.down, store.ClassDown(c.n), "down %d", c.n)
	}
	marks, args := store.InIDs([]int64{4, 9, 7, 11, 2, 30, 31, 32, 33})
	require.Equal(t, "?"+strings.Repeat(", ?", 11), marks)
	require.Equal(t, []any{int64(4), int64(9), int64(7), int64(11), int64(2), int64(30), int64(31), int64(32), int64(33),
		int64(33), int64(33), int64(33)}, args, "padded with the last id")
}

// stmtCounters reads the connection's own prepare, execute and close counts.
func stmtCounters(t *testing.T, db *sql.DB) (prepared, executed, closed int) {
	t.Helper()
	rows, err := db.Query(`SHOW SESSION STATUS WHERE Variable_name IN ('Com_stmt_prepare', 'Com_stmt_execute', 'Com_stmt_close')`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var name string
		var v int
		require.NoError(t, rows.Scan(&name, &v))
		switch name {
		case "Com_stmt_prepare":
			prepared = v
		case "Com_stmt_execute":
			executed = v
		case "Com_stmt_close":
			closed = v
		}
	}
	require.NoError(t, rows.Err())
	return prepared, executed, closed
}

// A text is prepared when it runs for the second time on a connection and
// executed from then on; the pool never holds more statements than its
// budget, and budget 0 prepares nothing.
func TestPreparedStatementsStayWithinTheirBudget(t *testing.T) {
	dsn := testenv.MySQLDSN(t)
	for _, c := range []struct {
		name          string
		budget, texts int
		runs          int
		wantPrepared  int
		wantExecuted  int
		wantHeldAtEnd int64
	}{
		{"off", 0, 3, 3, 0, 0, 0},
		{"one text", 10, 1, 4, 1, 3, 1},
		{"more texts than budget", 2, 5, 3, 5, 7, 2}, // an evicted text is seen anew before it is prepared again
	} {
		t.Run(c.name, func(t *testing.T) {
			db, held, err := store.OpenPreparingForTest(dsn, c.budget)
			require.NoError(t, err)
			defer db.Close()
			p0, e0, c0 := stmtCounters(t, db)
			for r := range c.runs {
				for k := range c.texts {
					var got int64
					// Each text a different statement: k+1 placeholders.
					q := "SELECT ?" + strings.Repeat(" + ?", k)
					args := make([]any, k+1)
					for i := range args {
						args[i] = int64(r + i)
					}
					require.NoError(t, db.QueryRow(q, args...).Scan(&got))
					want := int64(0)
					for i := range args {
						want += int64(r + i)
					}
					require.Equal(t, want, got, "text %d run %d", k, r)
					require.LessOrEqual(t, held(), int64(max(c.budget, 0)), "held within the budget")
					p, _, cl := stmtCounters(t, db)
					require.LessOrEqual(t, (p-p0)-(cl-c0), max(c.budget, 0), "statements live on the server")
				}
			}
			p, e, _ := stmtCounters(t, db)
			require.Equal(t, c.wantPrepared, p-p0, "prepared")
			require.Equal(t, c.wantExecuted, e-e0, "executed")
			require.Equal(t, c.wantHeldAtEnd, held(), "held at the end")
		})
	}
}

// Rows read through prepared statements (binary results) scan into the
// same values as through interpolated ones (text results), for the column
// types ax reads.
func TestPreparedStatementsReadWhatInterpolatedOnesRead(t *testing.T) {
	ctx := context.Background()
	st, dsn := testenv.Store(t)
	at := time.Now().Add(time.Hour)
	key := "order-ü-1"
	task, _, err := st.CreateTask(ctx, store.NewTask{Type: "prep.check", Priority: contracts.PriorityHigh, BizKey: &key,
		Payload: []byte(`{"a":"ü\u0000b"}`), Status: contracts.StatusReady, NextRunTimeMs: at.UnixMilli(),
		MaxRetries: 3, TimeoutMs: 1500, TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"})
	require.NoError(t, err)

	type row struct {
		ID, Next, Timeout    int64
		Status, Type         string
		BizKey, Trace        sql.NullString
		Payload              []byte
		Prio                 int
		Created              time.Time
		Started              sql.NullTime
		Dag                  bool
		HistEvent, HistActor string
		HistAt               time.Time
		Rejected             bool
	}
	read := func(db *sql.DB) row {
		var r row
		require.NoError(t, db.QueryRowContext(ctx, `SELECT t.id, t.next_run_time, t.timeout_ms, t.status, t.task_type,
			t.biz_key, t.trace_parent, t.payload, t.priority, t.created_at, t.started_at, t.dag,
			h.event_id, h.actor, h.created_at, h.rejected
			FROM tasks t JOIN task_history h ON h.task_id = t.id WHERE t.id IN (?, ?) AND t.status = ?`,
			task.ID, task.ID, string(contracts.StatusReady)).Scan(&r.ID, &r.Next, &r.Timeout, &r.Status, &r.Type,
			&r.BizKey, &r.Trace, &r.Payload, &r.Prio, &r.Created, &r.Started, &r.Dag,
			&r.HistEvent, &r.HistActor, &r.HistAt, &r.Rejected))
		return r
	}
	plain, _, err := store.OpenPreparingForTest(dsn, 0)
	require.NoError(t, err)
	defer plain.Close()
	prepared, held, err := store.OpenPreparingForTest(dsn, 10)
	require.NoError(t, err)
	defer prepared.Close()
	want := read(plain)
	require.Equal(t, task.ID, want.ID)
	for i := range 3 { // interpolated, then prepared, then executed again
		require.Equal(t, want, read(prepared), fmt.Sprintf("run %d", i))
	}
	require.EqualValues(t, 1, held(), "the query was prepared")
}

// A refused prepare pauses preparing on the connection: the statements
// after it go interpolated, without a failing prepare each.
func TestARefusedPreparePausesPreparing(t *testing.T) {
	db, held, err := store.OpenPreparingForTest(testenv.MySQLDSN(t), 10)
	require.NoError(t, err)
	defer db.Close()
	bad := "SELECT ? FROM no_such_table_anywhere"
	for range 2 { // interpolated, then a prepare the server refuses
		require.Error(t, db.QueryRow(bad, 1).Scan(new(int)))
	}
	p0, e0, _ := stmtCounters(t, db)
	for r := range 3 {
		require.Error(t, db.QueryRow(bad, r).Scan(new(int)), "still refused, interpolated")
		var got int64
		require.NoError(t, db.QueryRow("SELECT ? + 1", int64(r)).Scan(&got))
		require.Equal(t, int64(r+1), got)
	}
	p, e, _ := stmtCounters(t, db)
	require.Equal(t, p0, p, "nothing prepared while paused")
	require.Equal(t, e0, e, "nothing executed as a prepared statement")
	require.Zero(t, held())
}
