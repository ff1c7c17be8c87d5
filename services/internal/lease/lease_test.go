package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/lease"
	"github.com/axsched/ax/services/internal/testenv"
)

func TestParseReadsWhatValueWrites(t *testing.T) {
	tests := []struct {
		in      string
		node    string
		attempt int
		ok      bool
	}{
		{in: lease.Value("exec-1", 3), node: "exec-1", attempt: 3, ok: true},
		{in: lease.Value("host:8080", 12), node: "host:8080", attempt: 12, ok: true},
		{in: "exec-1", ok: false},
		{in: ":3", ok: false},
		{in: "exec-1:x", ok: false},
	}
	for _, tt := range tests {
		node, attempt, ok := lease.Parse(tt.in)
		require.Equal(t, tt.ok, ok, tt.in)
		if ok {
			require.Equal(t, tt.node, node, tt.in)
			require.Equal(t, tt.attempt, attempt, tt.in)
		}
	}
}

// Every script compares before it writes: a lease that has become another
// attempt's is neither renewed, released nor taken over.
func TestScriptsTouchOnlyTheExpectedValue(t *testing.T) {
	rdb, k := testenv.Redis(t)
	ctx := context.Background()
	key := k.Lock(1)
	require.NoError(t, rdb.Set(ctx, key, "a:1", time.Minute).Err())

	n, err := lease.Renew.Run(ctx, rdb, []string{key}, "b:1", 5000).Int()
	require.NoError(t, err)
	require.Zero(t, n, "renewed another's lease")
	n, err = lease.Release.Run(ctx, rdb, []string{key}, "b:1").Int()
	require.NoError(t, err)
	require.Zero(t, n, "released another's lease")
	n, err = lease.TakeOver.Run(ctx, rdb, []string{key}, "b:1", "c:2", 5000).Int()
	require.NoError(t, err)
	require.Zero(t, n, "took over a lease that is not the one judged dead")
	require.Equal(t, "a:1", rdb.Get(ctx, key).Val())

	n, err = lease.TakeOver.Run(ctx, rdb, []string{key}, "a:1", "c:2", 5000).Int()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Equal(t, "c:2", rdb.Get(ctx, key).Val())
	require.LessOrEqual(t, rdb.PTTL(ctx, key).Val(), 5*time.Second, "the new lease has the taker's length")
	n, err = lease.Release.Run(ctx, rdb, []string{key}, "c:2").Int()
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Zero(t, rdb.Exists(ctx, key).Val())
}

// Retake puts a lost lease back and renews one still held, but never
// takes one someone else holds.
func TestRetakeNeverTakesAnothersLease(t *testing.T) {
	rdb, k := testenv.Redis(t)
	ctx := context.Background()
	key := k.Lock(1)
	n, err := lease.Retake.Run(ctx, rdb, []string{key}, "a:1", 5000).Int()
	require.NoError(t, err)
	require.Equal(t, 1, n, "a lost lease is put back")
	require.Equal(t, "a:1", rdb.Get(ctx, key).Val())
	n, err = lease.Retake.Run(ctx, rdb, []string{key}, "a:1", 60000).Int()
	require.NoError(t, err)
	require.Equal(t, 1, n, "a lease still held is renewed")
	require.Greater(t, rdb.PTTL(ctx, key).Val(), 5*time.Second)
	n, err = lease.Retake.Run(ctx, rdb, []string{key}, "b:2", 5000).Int()
	require.NoError(t, err)
	require.Zero(t, n, "another's lease is taken")
	require.Equal(t, "a:1", rdb.Get(ctx, key).Val())
}
