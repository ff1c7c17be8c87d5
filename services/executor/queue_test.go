package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/executor"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/testenv"
)

// An executor with one busy worker and nine more tasks routed to it shows
// them as its queue (held by its feed, not claimed) and one active worker;
// the gauges are sampled every heartbeat.
func TestQueueLengthCountsWorkWaitingForTheNode(t *testing.T) {
	st, _ := testenv.Store(t)
	rdb, k := testenv.Redis(t)
	conn := testenv.NATS(t)
	const n = 10
	typ, node := "test.queue"+testenv.Suffix(), "queue-node"
	block := executor.HandlerFunc(func(ctx context.Context, _ *executor.Task) error {
		<-ctx.Done()
		return ctx.Err()
	})
	e, err := executor.New(executor.Config{Node: node, ShutdownTimeout: 100 * time.Millisecond, HeartbeatInterval: 100 * time.Millisecond},
		st, rdb, k, conn, clock.System{}, testenv.Logger(t),
		[]executor.TypeSpec{{Name: typ, Handler: block, Concurrency: 1, Timeout: time.Minute}})
	require.NoError(t, err)
	queue := metrics.ExecutorQueueLength.WithLabelValues(typ)
	require.Zero(t, testutil.ToFloat64(queue), "the type's series exists at zero from the start")
	stop, done := run(t, e)
	stopped := false
	defer func() {
		if !stopped {
			stop()
			<-done
		}
	}()

	var msgs []bus.Msg
	for id := int64(1); id <= n; id++ {
		msgs = append(msgs, routed(t, st, typ, node, id))
	}
	require.NoError(t, bus.PublishBatch(context.Background(), conn.JS, msgs))
	testenv.Eventually(t, 10*time.Second, "nine tasks queued behind the running one", func() bool {
		return testutil.ToFloat64(queue) == n-1 &&
			testutil.ToFloat64(metrics.ExecutorActive.WithLabelValues(typ)) == 1
	})

	stop()
	require.NoError(t, <-done)
	stopped = true
	require.Zero(t, testutil.ToFloat64(queue), "a stopped executor has handed its queue back")
}
