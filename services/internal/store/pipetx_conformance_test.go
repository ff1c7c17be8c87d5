package store_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// Pipelined transactions (pipetx.go) were checked against these releases:
// MariaDB's answers to a multi-statement packet and go-sql-driver/mysql's
// reading of them. Another release must be checked again, with this test
// as the list of what to check.
const (
	pipelineServerCheckedOn = "10.11."
	pipelineDriverCheckedOn = "v1.10.1"
)

// pipelineDB opens the connection settings of a pipelined store (those of
// store.ParseDSN, with multiStatements) on a fresh database with a table
// of its own.
func pipelineDB(t *testing.T) *sql.DB {
	t.Helper()
	cfg, err := store.ParseDSN(testenv.MySQLDSN(t))
	require.NoError(t, err)
	cfg.MultiStatements = true
	db, err := sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	_, err = db.Exec(`CREATE TABLE pt (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB`)
	require.NoError(t, err)
	return db
}

// values reads pt as id -> v, from a connection of its own: what is
// committed.
func values(t *testing.T, db *sql.DB) map[int]int {
	t.Helper()
	rows, err := db.Query(`SELECT id, v FROM pt`)
	require.NoError(t, err)
	defer rows.Close()
	out := map[int]int{}
	for rows.Next() {
		var id, v int
		require.NoError(t, rows.Scan(&id, &v))
		out[id] = v
	}
	require.NoError(t, rows.Err())
	return out
}

// TestPipelineConformance pins what pipeTx relies on from MariaDB and the
// driver, against the releases checked: statements sent together run in
// order in one transaction and the last one's result is returned; a failing
// statement stops the ones after it, COMMIT included, and leaves the
// transaction open to be rolled back; an IF(..., NULL) into a NOT NULL
// column fails (updateRows' check) rather than matching fewer rows; a
// dropped connection rolls its transaction back; one round trip's largest
// size fits max_allowed_packet.
func TestPipelineConformance(t *testing.T) {
	db := pipelineDB(t)
	ctx := context.Background()
	var version string
	require.NoError(t, db.QueryRow(`SELECT VERSION()`).Scan(&version))
	require.True(t, strings.HasPrefix(version, pipelineServerCheckedOn) && strings.Contains(version, "MariaDB"),
		"pipelined transactions were checked against MariaDB %s* and this is %s: re-check the protocol "+
			"(multi-statement results, errors mid-pipeline, rollback), then update pipelineServerCheckedOn", pipelineServerCheckedOn, version)
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == "github.com/go-sql-driver/mysql" {
				require.Equal(t, pipelineDriverCheckedOn, m.Version,
					"pipelined transactions were checked against go-sql-driver/mysql %s: re-check the protocol, then update pipelineDriverCheckedOn", pipelineDriverCheckedOn)
			}
		}
	}

	t.Run("statements sent together run in order and answer with the last", func(t *testing.T) {
		conn, err := db.Conn(ctx)
		require.NoError(t, err)
		defer conn.Close()
		res, err := conn.ExecContext(ctx, "START TRANSACTION;\nINSERT INTO pt VALUES (1, 1), (2, 2), (3, 3);\nUPDATE pt SET v = v + 10 WHERE id = ?", 1)
		require.NoError(t, err)
		n, err := res.RowsAffected()
		require.NoError(t, err)
		require.Equal(t, int64(1), n, "RowsAffected is the last statement's")
		require.Empty(t, values(t, db), "nothing committed yet")

		rows, err := conn.QueryContext(ctx, "UPDATE pt SET v = v + 1 WHERE id IN (?, ?);\nSELECT id, v FROM pt ORDER BY id", 1, 2)
		require.NoError(t, err)
		var got [][2]int
		for rows.Next() {
			var id, v int
			require.NoError(t, rows.Scan(&id, &v))
			got = append(got, [2]int{id, v})
		}
		require.NoError(t, rows.Err())
		require.NoError(t, rows.Close())
		require.Equal(t, [][2]int{{1, 12}, {2, 3}, {3, 3}}, got, "the rows are the last statement's, after the update before it")

		_, err = conn.ExecContext(ctx, "UPDATE pt SET v = 0 WHERE id = 3;\nCOMMIT")
		require.NoError(t, err)
		require.Equal(t, map[int]int{1: 12, 2: 3, 3: 0}, values(t, db))
	})

	t.Run("a failing statement stops the rest, COMMIT included, and leaves the transaction open", func(t *testing.T) {
		conn, err := db.Conn(ctx)
		require.NoError(t, err)
		defer conn.Close()
		_, err = conn.ExecContext(ctx, "START TRANSACTION;\nINSERT INTO pt VALUES (10, 10);\nINSERT INTO no_such_table VALUES (1);\nINSERT INTO pt VALUES (11, 11);\nCOMMIT")
		var me *mysql.MySQLError
		require.ErrorAs(t, err, &me)
		require.Equal(t, uint16(1146), me.Number, "no such table")
		var inTx, seen int
		require.NoError(t, conn.QueryRowContext(ctx, `SELECT @@in_transaction, COUNT(*) FROM pt WHERE id IN (10, 11)`).Scan(&inTx, &seen))
		require.Equal(t, 1, inTx, "the transaction is still open: COMMIT did not run")
		require.Equal(t, 1, seen, "the statement before the failure ran, the one after it did not")
		_, found := values(t, db)[10]
		require.False(t, found, "nothing committed")
		_, err = conn.ExecContext(ctx, "ROLLBACK")
		require.NoError(t, err)
		require.NoError(t, conn.QueryRowContext(ctx, `SELECT @@in_transaction, COUNT(*) FROM pt WHERE id IN (10, 11)`).Scan(&inTx, &seen))
		require.Equal(t, []int{0, 0}, []int{inTx, seen}, "rolled back")
	})

	t.Run("a NULL into a NOT NULL column fails the statement", func(t *testing.T) {
		_, err := db.ExecContext(ctx, `UPDATE pt SET v = IF(v = ?, ?, NULL) WHERE id IN (?, ?)`, 12, 13, 1, 2)
		var me *mysql.MySQLError
		require.ErrorAs(t, err, &me)
		require.Equal(t, uint16(1048), me.Number, "column cannot be null")
		require.Equal(t, map[int]int{1: 12, 2: 3, 3: 0}, values(t, db), "no row changed, not even the matching one")
	})

	t.Run("a dropped connection rolls its transaction back", func(t *testing.T) {
		conn, err := db.Conn(ctx)
		require.NoError(t, err)
		_, err = conn.ExecContext(ctx, "START TRANSACTION;\nINSERT INTO pt VALUES (20, 20)")
		require.NoError(t, err)
		// As inTx does when a ROLLBACK fails: the pool closes the
		// connection instead of reusing it.
		require.ErrorIs(t, conn.Raw(func(any) error { return driver.ErrBadConn }), driver.ErrBadConn)
		// The row's lock goes with the transaction: another one can take it.
		other, err := db.Conn(ctx)
		require.NoError(t, err)
		defer other.Close()
		_, err = other.ExecContext(ctx, `SET SESSION innodb_lock_wait_timeout = 1`)
		require.NoError(t, err)
		testenv.Eventually(t, 10*time.Second, "the dropped transaction's lock released", func() bool {
			_, err := other.ExecContext(ctx, `INSERT INTO pt VALUES (20, 21)`)
			return err == nil
		})
		require.Equal(t, 21, values(t, db)[20], "the dropped transaction's row is gone")
	})

	t.Run("the largest round trip fits max_allowed_packet", func(t *testing.T) {
		var maxPacket int
		require.NoError(t, db.QueryRow(`SELECT @@max_allowed_packet`).Scan(&maxPacket))
		require.GreaterOrEqual(t, maxPacket, 2*store.BatchChunkBytes,
			"a pipelined round trip may carry up to twice the chunk size (one chunk queued, one statement)")
	})
}
