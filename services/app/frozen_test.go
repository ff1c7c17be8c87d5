package app_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/app"
	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/membership"
	"github.com/axsched/ax/services/internal/natsembed"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// A MySQL that stops answering (SIGSTOP of a private server: connections
// stay open, nothing replies) must not stall what keeps running tasks
// alive in Redis. While it is frozen the node's lease renewals and
// registry heartbeats go on at their pace, a task whose handler finishes
// meanwhile keeps its lease while its outcome waits, and once MySQL is
// back every task ends SUCCESS having run exactly once.
func TestFrozenMySQLStallsNoLeaseAndLosesNoTask(t *testing.T) {
	const renew = 300 * time.Millisecond
	f := startFrozen(t, renew, nil)
	maria, rdb, k := f.maria, f.rdb, f.k
	ctx := context.Background()

	const freeze = 12 * time.Second
	// Long tasks run across the whole freeze; short ones finish in it,
	// so their outcomes wait for MySQL.
	ids := f.runSleeps(t, 6000, 6000, 6000, 20000, 20000, 20000, 20000)

	maria.Freeze()
	frozeAt := time.Now()
	thawed := false
	defer func() {
		if !thawed {
			maria.Thaw()
		}
	}()
	// A lease is renewed when its remaining time goes up between two
	// looks; the registry heartbeat when the node's LastHeartbeat moves.
	lastTTL := map[int64]time.Duration{}
	lastRenewal := map[int64]time.Time{}
	var lastBeat time.Time
	beats, worstLease := 0, time.Duration(0)
	for time.Since(frozeAt) < freeze {
		now := time.Now()
		for _, id := range ids[3:] {
			ttl, err := rdb.PTTL(ctx, k.Lock(id)).Result()
			require.NoError(t, err)
			require.Positive(t, ttl, "task %d lost its lease while MySQL was frozen", id)
			if prev, ok := lastTTL[id]; !ok || ttl > prev {
				lastRenewal[id] = now
			}
			lastTTL[id] = ttl
			worstLease = max(worstLease, now.Sub(lastRenewal[id]))
		}
		nodes, err := membership.List(ctx, rdb, k.Nodes(), time.Now(), time.Hour)
		require.NoError(t, err)
		require.Len(t, nodes, 1)
		if nodes[0].LastHeartbeat.After(lastBeat) {
			lastBeat, beats = nodes[0].LastHeartbeat, beats+1
		}
		time.Sleep(100 * time.Millisecond)
	}
	maria.Thaw()
	thawed = true
	t.Logf("while MySQL was frozen for %s: longest gap between lease renewals %s, %d registry heartbeats",
		freeze, worstLease.Round(time.Millisecond), beats)
	f.ranOnce(t, ids)
	// Renewed every period, give or take a look (100 ms) and a slow pass.
	require.Less(t, worstLease, 3*renew+200*time.Millisecond, "lease renewals stalled behind the frozen MySQL")
	require.GreaterOrEqual(t, beats, int(freeze/membership.IntervalDefault)-1, "registry heartbeats stalled behind the frozen MySQL")
}

// A handler that finishes while MySQL is frozen for longer than its lease
// (and longer than an outcome's tries in flight) keeps its lease: the
// watchdog renews it until the outcome is recorded, so after the thaw the
// reaper finds the silent task leased and leaves it, and the outcome
// lands. Nothing runs twice, however long the freeze.
func TestAnOutcomeOutlastsAFreezeLongerThanItsLease(t *testing.T) {
	f := startFrozen(t, 300*time.Millisecond, func(c *app.Config) { c.Executor.LockTTL = 2 * time.Second })
	ids := f.runSleeps(t, 5000, 5000, 5000)
	f.maria.Freeze()
	thawed := false
	defer func() {
		if !thawed {
			f.maria.Thaw()
		}
	}()
	// The handlers end in it; then it lasts past two outcome tries of
	// 10 s each and the reaper's silence (15 s).
	time.Sleep(30 * time.Second)
	f.maria.Thaw()
	thawed = true
	f.ranOnce(t, ids)
}

// frozen is a system running against a private MariaDB a test freezes.
type frozen struct {
	sys   *system
	maria *testenv.MariaDB
	db    *sql.DB
	rdb   *redis.Client
	k     keys.Keys
}

// startFrozen runs every service on a private MariaDB, the leases renewed
// every renew.
func startFrozen(t *testing.T, renew time.Duration, mutate func(*app.Config)) *frozen {
	t.Helper()
	f := &frozen{maria: testenv.StartMariaDB(t)}
	dsn := f.maria.Database("ax_frozen")
	f.rdb, f.k = testenv.Redis(t)
	listen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	f.sys = runApp(t, app.AllServices, &testenv.Clock{}, func(c *app.Config) {
		c.MySQLDSN, c.RedisAddr, c.RedisPrefix = dsn, "127.0.0.1:6379", f.k.Prefix
		c.EmbeddedNATS = true
		c.Embedded = natsembed.Config{Listen: listen, StoreDir: filepath.Join(t.TempDir(), "nats")}
		c.Executor.RenewInterval = renew
		if mutate != nil {
			mutate(c)
		}
	})
	cfg, err := store.ParseDSN(dsn)
	require.NoError(t, err)
	f.db, err = sql.Open("mysql", cfg.FormatDSN())
	require.NoError(t, err)
	t.Cleanup(func() { f.db.Close() })
	return f
}

// runSleeps submits an ax.sleep task per duration (ms) and returns their
// IDs once every one runs on the node.
func (f *frozen) runSleeps(t *testing.T, ms ...int64) []int64 {
	t.Helper()
	ctx := context.Background()
	var ids []int64
	for _, d := range ms {
		task, err := f.sys.api.Submit(ctx, contracts.SubmitRequest{Type: "ax.sleep",
			Payload: json.RawMessage(`{"ms":` + strconv.FormatInt(d, 10) + `}`)})
		require.NoError(t, err)
		id, err := strconv.ParseInt(task.ID, 10, 64)
		require.NoError(t, err)
		ids = append(ids, id)
	}
	testenv.Eventually(t, 20*time.Second, "every task RUNNING", func() bool {
		var n int
		require.NoError(t, f.db.QueryRow(`SELECT COUNT(*) FROM tasks WHERE status = 'RUNNING'`).Scan(&n))
		return n == len(ids)
	})
	// And every claim returned to the executor, which says so in its
	// registry heartbeat: a claim whose commit raced the freeze would wait
	// out the freeze before its handler starts, with nothing to renew.
	testenv.Eventually(t, 10*time.Second, "every task running on the node", func() bool {
		nodes, err := membership.List(ctx, f.rdb, f.k.Nodes(), time.Now(), time.Hour)
		return err == nil && len(nodes) == 1 && len(nodes[0].Running) == len(ids)
	})
	return ids
}

// ranOnce waits for every task to end SUCCESS and checks each ran once.
func (f *frozen) ranOnce(t *testing.T, ids []int64) {
	t.Helper()
	testenv.Eventually(t, 90*time.Second, "every task SUCCESS", func() bool {
		var n int
		require.NoError(t, f.db.QueryRow(`SELECT COUNT(*) FROM tasks WHERE status = 'SUCCESS'`).Scan(&n))
		return n == len(ids)
	})
	for _, id := range ids {
		var seq string
		require.NoError(t, f.db.QueryRow(`SELECT GROUP_CONCAT(to_status ORDER BY id SEPARATOR '>') FROM task_history
			WHERE task_id = ?`, id).Scan(&seq))
		require.Equal(t, "READY>RUNNING>SUCCESS", seq, "task %d", id)
	}
}
