package store_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// A relay pass that held rows behind a young hole reads, on its next
// pass, only the holes among them and what lies past them; what it
// returns must be exactly what reading everything past the cursor again
// would, with the held rows as held (not read again). Checked against
// the table for random IDs, cursors, held rows (some of the rows past
// the cursor committed only after the held pass: its holes) and limits.
func TestAPassAfterHeldRowsReadsWhatAFullReadWould(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(7, 42))
	var stored []int64
	var values []string
	for id := int64(1); id <= 400; id++ {
		if r.IntN(10) < 7 {
			stored = append(stored, id)
			values = append(values, fmt.Sprintf("(%d, %d, 'READY', 'RUNNING', 1, 'db', 'test', '%026d', 'read.past')", id, id, id))
		}
	}
	_, err := st.DB().ExecContext(ctx, `INSERT INTO task_history (id, task_id, from_status, to_status, attempt, reason, actor, event_id, task_type) VALUES `+
		strings.Join(values, ","))
	require.NoError(t, err)

	heldReturned := 0
	for trial := range 300 {
		cursor := int64(r.IntN(410))
		upTo := cursor + int64(r.IntN(120))
		var past, held []int64
		for _, id := range stored {
			if id > cursor {
				past = append(past, id)
				if id <= upTo && r.IntN(5) > 0 {
					held = append(held, id)
				}
			}
		}
		limit := 1 + r.IntN(150)
		ids, reasons, full, err := store.ReadPastForTest(ctx, st.DB(), cursor, limit, held)
		require.NoError(t, err)
		want := past[:min(limit, len(past))]
		require.Equal(t, fmt.Sprint(want), fmt.Sprint(ids), "trial %d: cursor %d, limit %d, %d held", trial, cursor, limit, len(held))
		if !full {
			require.Len(t, ids, len(past), "trial %d: a pass that is not full read everything past the cursor", trial)
		}
		for i, id := range ids {
			if slices.Contains(held, id) {
				require.Equal(t, "held", reasons[i], "trial %d: held row %d read again", trial, id)
				heldReturned++
			} else {
				require.Equal(t, "db", reasons[i], "trial %d: row %d", trial, id)
			}
		}
	}
	require.Greater(t, heldReturned, 1000, "the trials kept held rows")
}
