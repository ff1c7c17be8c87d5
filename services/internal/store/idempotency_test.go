package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

func countKeys(t *testing.T, st *store.Store) int {
	t.Helper()
	var n int
	require.NoError(t, st.DB().QueryRow(`SELECT COUNT(*) FROM idempotency_keys`).Scan(&n))
	return n
}

// lockWaiters counts transactions of this test's database blocked on a row
// lock, so a test can tell that duplicates queue on the key.
func lockWaiters(st *store.Store) (int, error) {
	var n int
	err := st.DB().QueryRow(`SELECT COUNT(*) FROM information_schema.INNODB_TRX t
		JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
		WHERE t.trx_state = 'LOCK WAIT' AND p.DB = DATABASE()`).Scan(&n)
	return n, err
}

// waitForLockWaiters returns once want transactions wait on a lock, or an
// error after a deadline; it runs inside fn, where t.Fatal is not allowed.
func waitForLockWaiters(st *store.Store, want int) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		n, err := lockWaiters(st)
		if err != nil {
			return err
		}
		if n >= want {
			return nil
		}
		// InnoDB refreshes INNODB_TRX only when it was last read more
		// than 100 ms ago; polling faster would freeze it.
		time.Sleep(150 * time.Millisecond)
	}
	n, _ := lockWaiters(st)
	return fmt.Errorf("%d transactions waited on the key after 10s, want %d", n, want)
}

func TestOnceRunsEffectOnceAcrossTasks(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	var effects atomic.Int32
	effect := func(context.Context) error { effects.Add(1); return nil }

	ran, err := st.Once(ctx, store.OnceParams{Scope: "sms.send", Key: "order-7", TaskID: 1, Attempt: 1}, effect)
	require.NoError(t, err)
	require.True(t, ran)
	// A resubmission of the same work under a new task ID.
	ran, err = st.Once(ctx, store.OnceParams{Scope: "sms.send", Key: "order-7", TaskID: 2, Attempt: 1}, effect)
	require.NoError(t, err)
	require.False(t, ran, "the effect already ran under this key")
	require.Equal(t, int32(1), effects.Load())

	var taskID int64
	var attempt int
	require.NoError(t, st.DB().QueryRow(`SELECT task_id, attempt FROM idempotency_keys
		WHERE scope = ? AND idem_key = ?`, "sms.send", []byte("order-7")).Scan(&taskID, &attempt))
	require.Equal(t, int64(1), taskID, "the key records the run that performed the effect")
	require.Equal(t, 1, attempt)
}

func TestOnceFailedEffectStoresNothing(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	p := store.OnceParams{Scope: "sms.send", Key: "order-8", TaskID: 1, Attempt: 1}
	boom := errors.New("gateway said no")
	var calls atomic.Int32

	ran, err := st.Once(ctx, p, func(context.Context) error { calls.Add(1); return boom })
	require.ErrorIs(t, err, boom)
	require.Equal(t, boom.Error(), err.Error(), "fn's error comes back unchanged")
	require.True(t, ran)
	require.Zero(t, countKeys(t, st), "a failed effect leaves no key")

	p.Attempt = 2
	ran, err = st.Once(ctx, p, func(context.Context) error { calls.Add(1); return nil })
	require.NoError(t, err)
	require.True(t, ran, "the retry runs the effect")
	require.Equal(t, int32(2), calls.Load())
	require.Equal(t, 1, countKeys(t, st))
}

func TestOnceKeysAreByteExact(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx := context.Background()
	var effects atomic.Int32
	effect := func(context.Context) error { effects.Add(1); return nil }

	for _, key := range []string{"a", "A", "a "} {
		ran, err := st.Once(ctx, store.OnceParams{Scope: "sms.send", Key: key, TaskID: 1}, effect)
		require.NoError(t, err)
		require.True(t, ran, "key %q is distinct", key)
	}
	ran, err := st.Once(ctx, store.OnceParams{Scope: "mail.send", Key: "a", TaskID: 1}, effect)
	require.NoError(t, err)
	require.True(t, ran, "the same key in another scope is distinct")
	require.Equal(t, int32(4), effects.Load())
	require.Equal(t, 4, countKeys(t, st))
}

func TestOnceRejectsInvalidParams(t *testing.T) {
	st, _ := testenv.Store(t)
	cases := map[string]store.OnceParams{
		"empty scope":      {Scope: "", Key: "k"},
		"long scope":       {Scope: strings.Repeat("s", store.MaxOnceScopeLen+1), Key: "k"},
		"empty key":        {Scope: "sms.send", Key: ""},
		"key of 256 bytes": {Scope: "sms.send", Key: strings.Repeat("k", store.MaxOnceKeyLen+1)},
	}
	for name, p := range cases {
		t.Run(name, func(t *testing.T) {
			ran, err := st.Once(context.Background(), p, func(context.Context) error {
				t.Error("fn must not run for invalid params")
				return nil
			})
			require.Error(t, err)
			require.False(t, ran)
			require.Zero(t, countKeys(t, st), "nothing is written")
		})
	}

	ran, err := st.Once(context.Background(), store.OnceParams{Scope: "sms.send", Key: strings.Repeat("k", store.MaxOnceKeyLen)},
		func(context.Context) error { return nil })
	require.NoError(t, err)
	require.True(t, ran, "a key of exactly 255 bytes is accepted")
}

func TestOnceConcurrentDuplicatesRunEffectOnce(t *testing.T) {
	st, _ := testenv.Store(t)
	const racers = 20
	var effects atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	rans := make([]bool, racers)
	errs := make([]error, racers)
	for i := range racers {
		wg.Go(func() {
			<-start
			rans[i], errs[i] = st.Once(context.Background(),
				store.OnceParams{Scope: "sms.send", Key: "order-9", TaskID: int64(i + 1), Attempt: 1},
				func(context.Context) error {
					effects.Add(1)
					// Hold the key until every other caller queues on it, so
					// the test shows they block on the lock rather than
					// merely arriving after the commit.
					return waitForLockWaiters(st, racers-1)
				})
		})
	}
	close(start)
	wg.Wait()

	ranCount := 0
	for i := range racers {
		require.NoError(t, errs[i])
		if rans[i] {
			ranCount++
		}
	}
	require.Equal(t, int32(1), effects.Load(), "the effect runs exactly once")
	require.Equal(t, 1, ranCount)
	require.Equal(t, racers-1, racers-ranCount, "every other call reports ran=false")
	require.Equal(t, 1, countKeys(t, st))
}

func TestOnceWaitersTakeOverAfterFailedEffect(t *testing.T) {
	st, _ := testenv.Store(t)
	const racers = 10
	var calls, successes atomic.Int32
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, racers)
	boom := errors.New("first run failed")
	for i := range racers {
		wg.Go(func() {
			<-start
			_, errs[i] = st.Once(context.Background(),
				store.OnceParams{Scope: "sms.send", Key: "order-10", TaskID: int64(i + 1), Attempt: 1},
				func(context.Context) error {
					if calls.Add(1) == 1 {
						// Fail only once the others wait, so they all
						// compete for the released key.
						if err := waitForLockWaiters(st, racers-1); err != nil {
							return err
						}
						return boom
					}
					successes.Add(1)
					return nil
				})
		})
	}
	close(start)
	wg.Wait()

	failed := 0
	for _, err := range errs {
		if err != nil {
			require.ErrorIs(t, err, boom, "only the failing run reports an error; deadlock victims retry")
			failed++
		}
	}
	require.Equal(t, 1, failed)
	require.Equal(t, int32(1), successes.Load(), "exactly one waiter runs the effect after the failure")
	require.Equal(t, int32(2), calls.Load())
	require.Equal(t, 1, countKeys(t, st))
}

func TestOnceRecordsEffectThatOutlivedItsContext(t *testing.T) {
	st, _ := testenv.Store(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := store.OnceParams{Scope: "sms.send", Key: "order-11", TaskID: 1, Attempt: 1}

	ran, err := st.Once(ctx, p, func(context.Context) error {
		// The task's deadline passes just after the effect happened.
		cancel()
		return nil
	})
	require.NoError(t, err)
	require.True(t, ran)
	require.Equal(t, 1, countKeys(t, st), "the completed effect is recorded despite the ended context")

	ran, err = st.Once(context.Background(), p, func(context.Context) error { return nil })
	require.NoError(t, err)
	require.False(t, ran)
}

func TestPruneIdempotencyKeysTakesOnlyOldOnes(t *testing.T) {
	ctx := context.Background()
	st, _ := testenv.Store(t)
	for i, age := range []string{"100 DAY", "95 DAY", "91 DAY", "1 DAY", "0 SECOND"} {
		_, err := st.DB().ExecContext(ctx, `INSERT INTO idempotency_keys (scope, idem_key, task_id, attempt, created_at)
			VALUES ('t', ?, 1, 1, NOW(3) - INTERVAL `+age+`)`, []byte{byte('a' + i)})
		require.NoError(t, err)
	}
	keys := func() []string {
		rows, err := st.DB().QueryContext(ctx, `SELECT idem_key FROM idempotency_keys ORDER BY idem_key`)
		require.NoError(t, err)
		defer rows.Close()
		var out []string
		for rows.Next() {
			var k []byte
			require.NoError(t, rows.Scan(&k))
			out = append(out, string(k))
		}
		return out
	}
	n, err := st.PruneIdempotencyKeys(ctx, 90*24*time.Hour, 2)
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "the limit bounds one call")
	require.Equal(t, []string{"c", "d", "e"}, keys(), "oldest first")
	n, err = st.PruneIdempotencyKeys(ctx, 90*24*time.Hour, 100)
	require.NoError(t, err)
	require.EqualValues(t, 1, n)
	require.Equal(t, []string{"d", "e"}, keys(), "keys younger than the retention stay")

	_, err = st.PruneIdempotencyKeys(ctx, 0, 100)
	require.Error(t, err, "no retention is refused, not taken as 'everything'")
	require.Equal(t, []string{"d", "e"}, keys())
}

// Once's effects hold connections of a pool of their own, sized to the
// handler slots: more effects than the main pool has connections (and
// more than its default of 32) all run at once, and the main pool still
// answers while they hold theirs.
func TestOnceEffectsHoldConnectionsOfTheirOwnPool(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, testenv.MySQLDSN(t), store.Options{Actor: "test", MaxOpenConns: 2})
	require.NoError(t, err)
	defer st.Close()
	const effects = 36
	st.SizeOncePool(effects)
	require.Equal(t, effects, st.OncePoolSize())

	var inside sync.WaitGroup
	inside.Add(effects)
	release := make(chan struct{})
	errs := make(chan error, effects)
	for i := range effects {
		go func() {
			_, err := st.Once(ctx, store.OnceParams{Scope: "pool", Key: fmt.Sprint(i), TaskID: int64(i + 1), Attempt: 1},
				func(context.Context) error {
					inside.Done()
					<-release
					return nil
				})
			errs <- err
		}()
	}
	all := make(chan struct{})
	go func() { inside.Wait(); close(all) }()
	select {
	case <-all:
	case <-time.After(60 * time.Second):
		close(release)
		t.Fatalf("not every effect started: they wait for connections (pool of %d)", st.OncePoolSize())
	}
	qctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	var one int
	err = st.DB().QueryRowContext(qctx, `SELECT 1`).Scan(&one)
	close(release)
	require.NoError(t, err, "the main pool answers while every effect holds a connection")
	for range effects {
		require.NoError(t, <-errs)
	}
	require.Equal(t, effects, countKeys(t, st))
}
