package store

import (
	"context"

	"github.com/axsched/ax/contracts"
)

// UpdateStatusForTest locks task id and queues its status change from ->
// to the way a transfer batch does, skipping the batch's own check of the
// row, then commits: what a planning bug would send.
func (s *Store) UpdateStatusForTest(ctx context.Context, id int64, from, to contracts.Status) error {
	return s.inTx(ctx, func(tx *pipeTx) error {
		if _, err := lockRows(ctx, tx, []int64{id}, false); err != nil {
			return err
		}
		return updateRows(ctx, tx, []plannedStep{{p: TransferParams{TaskID: id, From: from, To: to}}})
	})
}

// TransferWithSlowCommitForTest queues task id's change from -> to and a
// statement that takes sleep, so the COMMIT that follows them in the same
// round trip is still on its way when a caller gives up.
func (s *Store) TransferWithSlowCommitForTest(ctx context.Context, id int64, from, to contracts.Status, sleep float64) error {
	return s.inTx(ctx, func(tx *pipeTx) error {
		if _, err := lockRows(ctx, tx, []int64{id}, false); err != nil {
			return err
		}
		if err := updateRows(ctx, tx, []plannedStep{{p: TransferParams{TaskID: id, From: from, To: to}}}); err != nil {
			return err
		}
		return tx.Queue(ctx, `DO SLEEP(?)`, sleep)
	})
}
