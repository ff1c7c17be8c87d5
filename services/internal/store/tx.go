package store

import (
	"context"
	"database/sql"
	"fmt"
)

// Execer runs a statement inside a transaction; TransferParams.Also hooks
// get one.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// inTx runs fn in a transaction, committing when it returns nil.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	return s.inTxOpts(ctx, nil, fn)
}

// inTxOpts runs fn in a transaction with opts, committing when it returns
// nil, with the promise callers rely on: an error means nothing was
// written (a claim whose commit failed releases its lease, for one).
//
// So the transaction is begun without the caller's cancellation, which
// database/sql would otherwise answer with a ROLLBACK racing a COMMIT
// already sent (beginDetached): ctx still interrupts every statement (the
// driver drops the connection, and MySQL rolls back), and is checked once
// more before COMMIT goes out; once it has, its answer is waited for.
func (s *Store) inTxOpts(ctx context.Context, opts *sql.TxOptions, fn func(tx *sql.Tx) error) error {
	tx, err := beginDetached(ctx, s.db, opts)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := ctx.Err(); err != nil {
		_ = tx.Rollback()
		return err // given up before COMMIT went out: rolled back
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// beginDetached begins a transaction whose life ctx's end does not cut
// short (database/sql rolls back a transaction the moment its context
// ends), while ctx still bounds getting there: the wait for a pooled
// connection and for BEGIN's answer, which on a frozen server would
// otherwise last until the driver's read timeout.
func beginDetached(ctx context.Context, db *sql.DB, opts *sql.TxOptions) (*sql.Tx, error) {
	bctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	tx, err := db.BeginTx(bctx, opts)
	if !stop() {
		// ctx ended while BEGIN was under way: the transaction, if it
		// began, is rolled back with it.
		if err == nil {
			_ = tx.Rollback()
		}
		return nil, context.Cause(ctx)
	}
	// Never cancelled from here: the transaction ends by commit or
	// rollback. bctx has no parent to unregister from, so dropping cancel
	// leaks nothing.
	return tx, err
}
