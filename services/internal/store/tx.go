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
// already sent: ctx still interrupts every statement (the driver drops the
// connection, and MySQL rolls back), and is checked once more before COMMIT
// goes out; once it has, its answer is waited for.
func (s *Store) inTxOpts(ctx context.Context, opts *sql.TxOptions, fn func(tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(context.WithoutCancel(ctx), opts)
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
