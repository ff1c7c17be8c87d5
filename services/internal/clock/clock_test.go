package clock_test

import (
	"context"
	"testing"
	"time"

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
