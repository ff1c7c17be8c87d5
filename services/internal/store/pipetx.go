package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"time"
)

// Execer runs a statement inside a transaction; TransferParams.Also hooks
// get one.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// pipeTx is a transaction whose statements travel together, so it costs
// round trips only where its caller needs an answer. START TRANSACTION goes
// with the first statement sent; statements nobody reads the result of
// (Queue) wait and go with the next one sent, or with COMMIT. A claim or an
// outcome batch is then two round trips — the locking read, then the
// writes and COMMIT — instead of one per statement (five), which is what
// small batches under a steady load pay for most: every round trip is a
// wake-up of MySQL's thread and of the caller's goroutine.
//
// A statement that fails stops the ones after it in the same round trip,
// COMMIT included, and the transaction is rolled back. So a queued write
// must fail, not match fewer rows, when something is wrong: see
// updateRows.
//
// With Options.PlainTransactions the same methods run on an ordinary
// database/sql transaction instead (plain), a round trip per statement:
// the off switch of the pipeline, needing no multiStatements.
type pipeTx struct {
	plain   *sql.Tx
	conn    *sql.Conn
	begun   bool
	pending []statement
	// size estimates the queued statements' bytes, values included, so
	// that one round trip stays well under max_allowed_packet.
	size int
}

// statement is one queued statement and its values.
type statement struct {
	query string
	args  []any
}

// inTx runs fn in a pipelined transaction, committing when it returns nil.
// The connection goes back to the pool only with its transaction ended:
// when neither COMMIT nor ROLLBACK is known to have run, it is closed,
// which makes MySQL roll back.
func (s *Store) inTx(ctx context.Context, fn func(tx *pipeTx) error) error {
	if s.plainTx {
		return s.inPlainTx(ctx, fn)
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	tx := &pipeTx{conn: conn}
	ended := false
	defer func() {
		if !ended && tx.begun {
			if _, err := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
				_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			}
		}
		_ = conn.Close()
	}()
	if err := fn(tx); err != nil {
		return err
	}
	if !tx.begun && len(tx.pending) == 0 {
		return nil // nothing to commit: no round trip
	}
	if err := ctx.Err(); err != nil {
		return err // given up before COMMIT went out: rolled back
	}
	// Once COMMIT is on its way with the writes, MySQL runs them whether or
	// not anyone waits for the answer (a dropped connection does not stop a
	// packet already received). So the answer is waited for even if the
	// caller gives up meanwhile: an error must mean nothing was written.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitWait)
	defer cancel()
	if _, err := tx.flush(cctx, "COMMIT"); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	ended = true
	return nil
}

// inPlainTx runs fn in an ordinary transaction, with inTx's promise: an
// error means nothing was written. The transaction is begun without the
// caller's cancellation, which database/sql would otherwise answer with a
// ROLLBACK racing a COMMIT already sent; ctx still interrupts every
// statement, and once COMMIT is sent its answer is waited for.
func (s *Store) inPlainTx(ctx context.Context, fn func(tx *pipeTx) error) error {
	sqlTx, err := s.db.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(&pipeTx{plain: sqlTx}); err != nil {
		_ = sqlTx.Rollback()
		return err
	}
	if err := ctx.Err(); err != nil {
		_ = sqlTx.Rollback()
		return err // given up before COMMIT went out: rolled back
	}
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// commitWait bounds the wait for a commit's answer; only a server or
// network that stops answering reaches it, and then, as with any commit
// whose answer is lost, the outcome is unknown.
const commitWait = 30 * time.Second

// Queue adds a statement to go with the next one sent; its error, if any,
// is returned by that call (or by the commit). Only when the statements
// queued already are large (batchChunkBytes) are they sent first, and
// their error is returned here.
func (tx *pipeTx) Queue(ctx context.Context, query string, args ...any) error {
	if tx.plain != nil {
		_, err := tx.plain.ExecContext(ctx, query, args...)
		return err
	}
	size := len(query) + rowBytes(args)
	if tx.size > 0 && tx.size+size > batchChunkBytes {
		if _, err := tx.flush(ctx, ""); err != nil {
			return err
		}
	}
	tx.pending = append(tx.pending, statement{query, args})
	tx.size += size
	return nil
}

// text takes what goes to the server with query: START TRANSACTION when
// not yet sent, the queued statements, then query itself (when not empty).
// The text and the values are put together once, at their full size: a
// batch queues a few large statements, and growing them piecemeal would
// copy each several times.
func (tx *pipeTx) text(query string, args []any) (string, []any) {
	stmts := tx.pending
	if query != "" {
		stmts = append(stmts, statement{query, args})
	}
	n, nargs := len("START TRANSACTION;\n"), 0
	for _, st := range stmts {
		n += len(st.query) + len(";\n")
		nargs += len(st.args)
	}
	var b strings.Builder
	b.Grow(n)
	all := make([]any, 0, nargs)
	if !tx.begun {
		b.WriteString("START TRANSACTION;\n")
	}
	for i, st := range stmts {
		if i > 0 {
			b.WriteString(";\n")
		}
		b.WriteString(st.query)
		all = append(all, st.args...)
	}
	tx.pending = tx.pending[:0]
	tx.size = 0
	// Sent means begun: a failure from here on still leaves a transaction
	// to roll back, or a connection to drop.
	tx.begun = true
	return b.String(), all
}

// flush sends the queued statements and query, if any, and returns the
// result of the round trip.
func (tx *pipeTx) flush(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if query == "" && len(tx.pending) == 0 {
		return nil, nil
	}
	q, all := tx.text(query, args)
	return tx.conn.ExecContext(ctx, q, all...)
}

// ExecContext sends query, after what is queued, and returns its result:
// with statements queued before it, RowsAffected is query's own (the
// driver reports the last statement's).
func (tx *pipeTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if tx.plain != nil {
		return tx.plain.ExecContext(ctx, query, args...)
	}
	return tx.flush(ctx, query, args...)
}

// QueryContext sends query, after what is queued, and returns its rows
// (the driver skips the results of the statements before it, which have no
// rows).
func (tx *pipeTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if tx.plain != nil {
		return tx.plain.QueryContext(ctx, query, args...)
	}
	q, all := tx.text(query, args)
	return tx.conn.QueryContext(ctx, q, all...)
}

// QueryRowContext is QueryContext for one row.
func (tx *pipeTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if tx.plain != nil {
		return tx.plain.QueryRowContext(ctx, query, args...)
	}
	q, all := tx.text(query, args)
	return tx.conn.QueryRowContext(ctx, q, all...)
}
