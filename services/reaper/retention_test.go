package reaper_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
	"github.com/axsched/ax/services/reaper"
)

// endedTask is testenv.EndedTask with its history published.
func endedTask(t *testing.T, st *store.Store, status contracts.Status, age time.Duration, deadLetter bool) int64 {
	t.Helper()
	id := testenv.EndedTask(t, st, status, age, deadLetter)
	testenv.HistoryPublished(t, st)
	return id
}

func exists(t *testing.T, st *store.Store, id int64) bool {
	t.Helper()
	var n int
	require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM tasks WHERE id = ?`, id).Scan(&n))
	return n == 1
}

// TestRetentionPassKeepsEachStateItsOwnTime: every state is judged by its
// own retention; zero keeps for ever; work in progress is never touched.
func TestRetentionPassKeepsEachStateItsOwnTime(t *testing.T) {
	ctx := context.Background()
	st, _ := testenv.Store(t)
	rdb, k := testenv.Redis(t)
	cases := []struct {
		status     contracts.Status
		age        time.Duration
		deadLetter bool
		gone       bool
	}{
		{contracts.StatusSuccess, 2 * time.Hour, false, true},
		{contracts.StatusSuccess, 30 * time.Minute, false, false},
		{contracts.StatusCancelled, 1000 * time.Hour, false, false}, // retention 0: for ever
		{contracts.StatusFailed, 2 * time.Hour, true, false},        // a dead letter: 3 h
		{contracts.StatusFailed, 4 * time.Hour, true, true},
		{contracts.StatusTimeout, 4 * time.Hour, true, true},
		{contracts.StatusRunning, 1000 * time.Hour, false, false},
		{contracts.StatusRetrying, 1000 * time.Hour, false, false},
	}
	ids := make([]int64, len(cases))
	for i, c := range cases {
		ids[i] = endedTask(t, st, c.status, c.age, c.deadLetter)
	}
	r := reaper.New(reaper.Config{Retention: reaper.RetentionConfig{Success: time.Hour, Failed: 3 * time.Hour}},
		st, rdb, k, &manualClock{now: time.Now()}, testenv.Logger(t))
	pass, err := r.PruneFinished(ctx)
	require.NoError(t, err)
	require.Equal(t, map[contracts.Status]int64{contracts.StatusSuccess: 1, contracts.StatusFailed: 1, contracts.StatusTimeout: 1}, pass.Pruned)
	require.EqualValues(t, 2, pass.DeadLetters)
	for i, c := range cases {
		require.Equal(t, !c.gone, exists(t, st, ids[i]), "%s ended %s ago", c.status, c.age)
	}
	require.Zero(t, rdb.Exists(ctx, k.RetentionLease()).Val(), "the lease is released after the pass")
}

// TestRetentionPassIsBounded: a pass stops after PassBatches batches of
// Batch tasks and says more is due; the next pass finishes.
func TestRetentionPassIsBounded(t *testing.T) {
	ctx := context.Background()
	st, _ := testenv.Store(t)
	rdb, k := testenv.Redis(t)
	for i := range 7 {
		endedTask(t, st, contracts.StatusSuccess, time.Duration(2+i)*time.Hour, false)
	}
	r := reaper.New(reaper.Config{Retention: reaper.RetentionConfig{Success: time.Hour, Batch: 2, PassBatches: 2}},
		st, rdb, k, &manualClock{now: time.Now()}, testenv.Logger(t))
	var got []int64
	var more []bool
	for range 2 {
		pass, err := r.PruneFinished(ctx)
		require.NoError(t, err)
		got, more = append(got, pass.Tasks()), append(more, pass.More)
	}
	require.Equal(t, []int64{4, 3}, got)
	require.Equal(t, []bool{true, false}, more)
}

// TestRetentionLeaseLetsOneReaperPrune: while one reaper's pass holds the
// lease another reaper's pass does nothing; a holder whose lease was taken
// over stops.
func TestRetentionLeaseLetsOneReaperPrune(t *testing.T) {
	ctx := context.Background()
	st, _ := testenv.Store(t)
	rdb, k := testenv.Redis(t)
	for i := range 6 {
		endedTask(t, st, contracts.StatusSuccess, time.Duration(2+i)*time.Hour, false)
	}
	cfg := func(holder string) reaper.Config {
		return reaper.Config{Retention: reaper.RetentionConfig{Success: time.Hour, Batch: 1, Pause: 100 * time.Millisecond, Holder: holder}}
	}
	one := reaper.New(cfg("one"), st, rdb, k, &manualClock{now: time.Now()}, testenv.Logger(t))
	two := reaper.New(cfg("two"), st, rdb, k, &manualClock{now: time.Now()}, testenv.Logger(t))
	done := make(chan reaper.RetentionPass, 1)
	go func() {
		pass, err := one.PruneFinished(ctx)
		assert.NoError(t, err)
		done <- pass
	}()
	testenv.Eventually(t, 10*time.Second, "reaper one holds the lease", func() bool {
		return rdb.Get(ctx, k.RetentionLease()).Val() == "one"
	})
	pass, err := two.PruneFinished(ctx)
	require.NoError(t, err)
	require.True(t, pass.Busy)
	require.Zero(t, pass.Tasks())
	require.EqualValues(t, 6, (<-done).Tasks())

	// Reaper one's lease taken over mid-pass: it stops at its next batch.
	for i := range 6 {
		endedTask(t, st, contracts.StatusSuccess, time.Duration(2+i)*time.Hour, false)
	}
	errs := make(chan error, 1)
	go func() {
		pass, err := one.PruneFinished(ctx)
		assert.Less(t, pass.Tasks(), int64(6))
		errs <- err
	}()
	testenv.Eventually(t, 10*time.Second, "reaper one holds the lease", func() bool {
		return rdb.Get(ctx, k.RetentionLease()).Val() == "one"
	})
	require.NoError(t, rdb.Set(ctx, k.RetentionLease(), "two", time.Minute).Err())
	err = <-errs
	require.Error(t, err)
	require.Equal(t, "two", rdb.Get(ctx, k.RetentionLease()).Val(), "the old holder leaves the new one's lease alone")
	require.False(t, errors.Is(err, context.Canceled))
}

// TestRetentionConfigRefusesTyposAndNegatives: a retention is 0 (for ever)
// or at least a minute; a batch is bounded.
func TestRetentionConfigRefusesTyposAndNegatives(t *testing.T) {
	for _, tc := range []struct {
		c  reaper.RetentionConfig
		ok bool
	}{
		{reaper.RetentionConfig{}, true},
		{reaper.RetentionConfig{Success: time.Minute, Cancelled: 7 * 24 * time.Hour, Failed: 30 * 24 * time.Hour}, true},
		{reaper.RetentionConfig{Success: 59 * time.Second}, false},
		{reaper.RetentionConfig{Cancelled: 168}, false}, // a unit forgotten: 168 ns
		{reaper.RetentionConfig{Failed: -time.Hour}, false},
		{reaper.RetentionConfig{Success: time.Hour, Batch: 50}, true},
		{reaper.RetentionConfig{Success: time.Hour, Batch: -1}, false},
		{reaper.RetentionConfig{Success: time.Hour, Batch: reaper.RetentionBatchMax + 1}, false},
	} {
		err := tc.c.Validate()
		require.Equal(t, tc.ok, err == nil, "%+v: %v", tc.c, err)
	}
}
