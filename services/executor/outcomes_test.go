package executor

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// Parents of one child finishing on an executor whose outcome writers
// commit side by side meet on the child in concurrent transactions: the
// child waiting for their success is released exactly once, the one
// waiting for a failure cancelled exactly once, and no outcome is lost.
func TestOutcomeWritersSideBySideSettleASharedChildOnce(t *testing.T) {
	const parents = 40
	_, k := testenv.Redis(t)
	g := newFaultRig(t, "127.0.0.1:6379", k, "test.outcomewriters")
	ctx := context.Background()
	linked := make(chan struct{})
	handler := HandlerFunc(func(ctx context.Context, _ *Task) error {
		select {
		case <-linked: // every parent returns as soon as the children wait
		case <-ctx.Done():
		}
		return ctx.Err()
	})
	e, _ := g.executor(t, "writers", Config{OutcomeWriters: 4, OutcomeOverflow: 1}, handler, nil)
	require.Equal(t, 4, e.cfg.OutcomeWriters)

	deps := func(when contracts.Condition) []store.Dependency {
		out := make([]store.Dependency, parents)
		for i := range out {
			out[i] = store.Dependency{ParentID: int64(i + 1), When: when}
		}
		return out
	}
	for id := int64(1); id <= parents; id++ {
		g.dispatch(t, id)
	}
	for id, when := range map[int64]contracts.Condition{1001: contracts.WhenSuccess, 1002: contracts.WhenFailure} {
		_, _, err := g.st.CreateTask(ctx, store.NewTask{ID: id, Type: g.typ, Priority: contracts.PriorityNormal,
			Status: contracts.StatusSuspend, MaxRetries: 3, TimeoutMs: 60000, Reason: "waiting", Parents: deps(when)})
		require.NoError(t, err)
	}
	close(linked)

	testenv.Eventually(t, 60*time.Second, "every parent SUCCESS", func() bool {
		for id := int64(1); id <= parents; id++ {
			task, err := g.st.GetTask(ctx, id)
			require.NoError(t, err)
			if task.Status != contracts.StatusSuccess {
				return false
			}
		}
		return true
	})
	for id := int64(1); id <= parents; id++ {
		require.Equal(t, "READY>RUNNING>SUCCESS", g.history(t, id), "parent %d", id)
	}
	require.Equal(t, "SUSPEND>READY", g.history(t, 1001), "released once, by the last parent's transaction")
	require.Equal(t, "SUSPEND>CANCELLED", g.history(t, 1002), "cancelled once")
	h, err := g.st.History(ctx, 1001)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(h[1].Reason, "released: all 40 parents ended (40 SUCCESS)"), h[1].Reason)
}

// A second outcome transaction starts beside a running one only once
// Config.OutcomeOverflow outcomes wait for it: with the first transaction
// held, nine finished runs wait for it under the default (64), and start
// a transaction of their own once the overflow is four.
func TestASecondOutcomeTransactionStartsOnlyForABacklog(t *testing.T) {
	for _, tc := range []struct {
		overflow int
		second   bool
	}{{0, false}, {4, true}} {
		t.Run(fmt.Sprintf("overflow %d", tc.overflow), func(t *testing.T) {
			_, k := testenv.Redis(t)
			g := newFaultRig(t, "127.0.0.1:6379", k, "test.overflow")
			hold := make(chan struct{})
			var calls atomic.Int32
			g.beforeRecord = func() {
				if calls.Add(1) == 1 {
					<-hold
				}
			}
			ran := make(chan int64, 10)
			e, _ := g.executor(t, "overflow", Config{OutcomeWriters: 2, OutcomeOverflow: tc.overflow}, reporting(ran), nil)
			require.Equal(t, 2, e.cfg.OutcomeWriters)
			for id := int64(1); id <= 10; id++ {
				g.dispatch(t, id)
			}
			for range 10 {
				select {
				case <-ran:
				case <-time.After(20 * time.Second):
					t.Fatal("not every task ran")
				}
			}
			if tc.second {
				testenv.Eventually(t, 10*time.Second, "a second transaction", func() bool { return calls.Load() >= 2 })
			} else {
				time.Sleep(500 * time.Millisecond)
				require.EqualValues(t, 1, calls.Load(), "nine waiting outcomes start no second transaction")
			}
			close(hold)
			for id := int64(1); id <= 10; id++ {
				g.awaitStatus(t, id, contracts.StatusSuccess)
			}
		})
	}
}
