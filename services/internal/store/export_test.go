package store

import (
	"context"

	"github.com/axsched/ax/contracts"
)

// ChangeStatusForTest locks task id and queues its status change from ->
// to the way a transfer batch does, skipping the batch's own check of the
// row (what a planning bug would send), then — when sleep > 0 — a
// statement that takes that long, so the COMMIT that follows in the same
// round trip is still on its way when a caller gives up.
func (s *Store) ChangeStatusForTest(ctx context.Context, id int64, from, to contracts.Status, sleep float64) error {
	return s.inTx(ctx, func(tx *pipeTx) error {
		if _, err := lockRows(ctx, tx, []int64{id}, false); err != nil {
			return err
		}
		if err := updateRows(ctx, tx, []plannedStep{{p: TransferParams{TaskID: id, From: from, To: to}}}); err != nil {
			return err
		}
		if sleep <= 0 {
			return nil
		}
		return tx.Queue(ctx, `DO SLEEP(?)`, sleep)
	})
}

// BatchChunkBytes is batchChunkBytes, for the pipeline's conformance test.
const BatchChunkBytes = batchChunkBytes
