package app_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestClusterLimitKeepsLaneOrder: a type limited to one RUNNING task
// cluster-wide, 20 tasks per lane released at once, default settings
// otherwise. A limit is where lanes matter: every high task starts before
// any normal and every normal before any low, and a claim that finds the
// type at its limit leaves its task where it is (no RETRYING, no attempt
// spent). The tasks are released by falling due together, or by the
// resume of their paused type.
func TestClusterLimitKeepsLaneOrder(t *testing.T) {
	const perLane = 20
	for _, tc := range []struct {
		name   string
		paused bool
		runAt  time.Duration
	}{
		{name: "due together", runAt: 12 * time.Second},
		{name: "released by resume", paused: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, k := testenv.Redis(t)
			sys := startSystem(t, "127.0.0.1:6379", k.Prefix, nil)
			ctx := context.Background()
			_, err := sys.api.UpdateType(ctx, "ax.sleep", contracts.TaskTypeUpdate{Concurrency: ptr(1), Paused: ptr(tc.paused)})
			require.NoError(t, err)
			sys.expireTypeCaches()

			var batch contracts.BatchRequest
			due := time.Now().Add(tc.runAt).UTC().Format(time.RFC3339Nano)
			for range perLane {
				// Interleaved, so submission order says nothing about lanes.
				for _, p := range []contracts.Priority{contracts.PriorityLow, contracts.PriorityNormal, contracts.PriorityHigh} {
					req := contracts.SubmitRequest{Type: "ax.sleep", Priority: string(p), Payload: json.RawMessage(`{"ms":30}`)}
					if tc.runAt > 0 {
						req.RunAt = due
					}
					batch.Tasks = append(batch.Tasks, req)
				}
			}
			_, err = sys.api.SubmitBatch(ctx, batch)
			require.NoError(t, err)
			if tc.paused {
				time.Sleep(2 * time.Second)
				require.Equal(t, 3*perLane, sys.count(t, "status = 'READY'"), "a paused type's tasks wait")
				_, err = sys.api.UpdateType(ctx, "ax.sleep", contracts.TaskTypeUpdate{Paused: ptr(false)})
				require.NoError(t, err)
			}
			testenv.Eventually(t, 90*time.Second, "all tasks SUCCESS", func() bool {
				return sys.count(t, "status = 'SUCCESS'") == 3*perLane
			})

			order, prio := sys.runningOrder(t)
			require.Len(t, order, 3*perLane, "each task started once")
			lanes := make([]byte, len(order))
			for i, id := range order {
				lanes[i] = prio[id][0]
			}
			t.Logf("start order by lane: %s", lanes)
			// The first claim of an idle type takes whatever task reached the
			// fetcher first: the lanes' messages come over consumers of their
			// own, so when all fall due in one millisecond any lane may be
			// first in. From the second start on, tasks wait and the lanes rule.
			for i := 2; i < len(order); i++ {
				require.LessOrEqual(t, prio[order[i-1]].Rank(), prio[order[i]].Rank(),
					"start %d (%s) came after start %d (%s)", i, prio[order[i]], i-1, prio[order[i-1]])
			}
			require.Zero(t, sys.count(t, "attempt <> 1 OR retry_count <> 0"), "no attempt spent on the limit")
			var retrying int
			require.NoError(t, sys.db.QueryRow(`SELECT COUNT(*) FROM task_history WHERE to_status = 'RETRYING'`).Scan(&retrying))
			require.Zero(t, retrying, "tasks turned back through RETRYING")
		})
	}
}
