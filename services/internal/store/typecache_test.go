package store_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

type loadFunc = func(context.Context, string) (*store.TaskType, error)

// countLoads makes c count its reads of MySQL.
func countLoads(c *store.TypeCache) *atomic.Int64 {
	var n atomic.Int64
	c.WrapTypeLoad(func(load loadFunc, ctx context.Context, name string) (*store.TaskType, error) {
		n.Add(1)
		return load(ctx, name)
	})
	return &n
}

// TestTypeCacheReadOutlivesItsCaller: a caller that gives up during the
// read gets its context's error, but the read goes on for the others and
// fills the cache, so the next caller reads nothing more.
func TestTypeCacheReadOutlivesItsCaller(t *testing.T) {
	st, _ := testenv.Store(t)
	registerType(t, st, "sms.send")
	c := store.NewTypeCache(st, time.Minute, &testenv.Clock{})
	loads := countLoads(c)
	started, release := make(chan struct{}), make(chan struct{})
	c.WrapTypeLoad(func(load loadFunc, ctx context.Context, name string) (*store.TaskType, error) {
		close(started)
		<-release
		return load(ctx, name)
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		_, err := c.Get(ctx, "sms.send")
		done <- err
	}()
	<-started
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	close(release)
	tt, err := c.Get(context.Background(), "sms.send")
	require.NoError(t, err)
	require.Equal(t, "sms.send", tt.Name)
	require.EqualValues(t, 1, loads.Load(), "the second caller joined the read or found its result cached")
}

// BenchmarkTypeCacheExpired: many submissions ask for one type whose entry
// just expired (a TTL of zero keeps it so), as every second brings at
// 1,000 submissions/s; reports the MySQL reads per Get.
func BenchmarkTypeCacheExpired(b *testing.B) {
	st, _ := testenv.Store(b)
	registerType(b, st, "bench.type")
	c := store.NewTypeCache(st, 0, nil)
	loads := countLoads(c)
	b.ReportAllocs()
	b.SetParallelism(50)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Get(context.Background(), "bench.type"); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(loads.Load())/float64(b.N), "reads/op")
}
