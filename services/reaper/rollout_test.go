package reaper_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
	"github.com/axsched/ax/services/reaper"
)

// Two reapers guard at once: the breach rolls the canary back exactly
// once, logged with the figures (the rollout lease lets one guard judge;
// the revision fence behind it makes a second move a conflict, which the
// end of the test shows on its own).
func TestOneGuardRollsABreachBackOnce(t *testing.T) {
	ctx := context.Background()
	st, _ := testenv.Store(t)
	rdb, k := testenv.Redis(t)
	require.NoError(t, st.RegisterType(ctx, store.TaskType{Name: "sms.send", TimeoutMs: 60000, MaxRetries: 3, Priority: contracts.PriorityNormal}))
	_, err := st.StartRollout(ctx, store.Rollout{Type: "sms.send", Version: "v2", Steps: []int{10, 100}, StepTime: time.Hour,
		Grace: time.Second, Window: time.Minute, MinSamples: 50, MaxP99Worse: 0.10, MaxFailureDiff: 0.02, MaxTimeoutDiff: 0.02}, "test")
	require.NoError(t, err)
	// The canary is 30 % slower than stable.
	for i := range 100 {
		for _, sm := range []store.RolloutSample{
			{Version: "v1", Outcome: "success", Duration: time.Duration(100+i) * time.Millisecond},
			{Version: "v2", Outcome: "success", Duration: time.Duration(130+i) * time.Millisecond},
		} {
			require.NoError(t, store.RecordSample("sms.send", sm)(ctx, st.DB()))
		}
	}
	reapers := make([]*reaper.Reaper, 2)
	for i := range reapers {
		cfg := reaper.Config{}
		cfg.Retention.Holder = []string{"r1", "r2"}[i]
		reapers[i] = reaper.New(cfg, st, rdb, k, &manualClock{now: time.Now()}, testenv.Logger(t))
	}
	moved := make([]int, len(reapers))
	var wg sync.WaitGroup
	for i, r := range reapers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := r.GuardRollouts(ctx)
			require.NoError(t, err)
			moved[i] = n
		}()
	}
	wg.Wait()
	require.Equal(t, 1, moved[0]+moved[1], "one guard moved it")
	// The next passes (either reaper) find nothing running.
	for _, r := range reapers {
		n, err := r.GuardRollouts(ctx)
		require.NoError(t, err)
		require.Zero(t, n)
	}
	ro, err := st.GetRollout(ctx, "sms.send")
	require.NoError(t, err)
	require.Equal(t, contracts.RolloutRolledBack, ro.State)
	require.Equal(t, 0, ro.Percent)
	log, err := st.RolloutLog(ctx, "sms.send", 10)
	require.NoError(t, err)
	require.Len(t, log, 2, "start and one rollback")
	require.Equal(t, "rollback", log[0].Action)
	require.Contains(t, log[0].Reason, "more than 10 % above stable p99")
	require.Contains(t, log[0].Figures, `"runs":100`)

	// A move fenced on a revision that has passed changes nothing.
	_, err = st.MoveRollout(ctx, "sms.send", ro.Revision-1, func(*store.Rollout) (store.RolloutMove, error) {
		return store.RolloutMove{Action: "advance"}, nil
	})
	require.ErrorIs(t, err, store.ErrConflict)
}
