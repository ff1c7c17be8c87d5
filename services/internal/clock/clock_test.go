package clock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/testenv"
)

func TestRedisClockCorrectsSkewedLocalClock(t *testing.T) {
	rdb, _ := testenv.Redis(t)
	for _, skew := range []time.Duration{5 * time.Second, -3 * time.Second, 0} {
		t.Run(skew.String(), func(t *testing.T) {
			c := clock.NewRedis(rdb, func() time.Time { return time.Now().Add(skew) }, testenv.Logger(t))
			require.NoError(t, c.Sync(context.Background()))
			redisNow, err := rdb.Time(context.Background()).Result()
			require.NoError(t, err)
			require.WithinDuration(t, redisNow, c.Now(), 50*time.Millisecond)
			require.InDelta(t, float64(-skew), float64(c.Offset()), float64(50*time.Millisecond))
		})
	}
}

// stallHook holds every command 40 ms before sending it, as a request
// queued behind a busy machine would be.
type stallHook struct{}

func (stallHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (stallHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (stallHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		time.Sleep(40 * time.Millisecond)
		return next(ctx, cmd)
	}
}

// TestRedisClockIsNeverAhead: round trips whose requests sat in a queue
// before Redis read its clock must not put the estimate ahead of Redis — an
// estimate ahead runs delayed tasks early. Halving such a round trip would
// put the estimate ~20 ms ahead.
func TestRedisClockIsNeverAhead(t *testing.T) {
	rdb, _ := testenv.Redis(t)
	stalled := redis.NewClient(rdb.Options())
	defer stalled.Close()
	stalled.AddHook(stallHook{})
	c := clock.NewRedis(stalled, nil, testenv.Logger(t))
	for range 5 {
		require.NoError(t, c.Sync(context.Background()))
		est := c.Now()
		redisNow, err := rdb.Time(context.Background()).Result()
		require.NoError(t, err)
		// Redis TIME has microsecond resolution.
		require.False(t, est.After(redisNow.Add(time.Microsecond)), "estimate %s ahead of Redis", est.Sub(redisNow))
		require.WithinDuration(t, redisNow, est, 50*time.Millisecond, "and not far behind")
	}
}
