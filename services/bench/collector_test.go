package bench

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/events"
)

func report(t *testing.T, c *collector, id int64, ok bool) {
	t.Helper()
	data, err := json.Marshal(events.BenchDone{TaskID: id, Attempt: 1, StartNs: 1, EndNs: 2, OK: ok})
	require.NoError(t, err)
	c.handle(&nats.Msg{Data: data})
}

// TestWaitEndsWhenEveryTaskSucceeded: tasks finishing out of order, failed
// runs and reports for other tasks do not end the wait early; the last
// success ends it; a stall says how many never succeeded. Reports come in
// batches or one per message (older executors).
func TestWaitEndsWhenEveryTaskSucceeded(t *testing.T) {
	c := &collector{byTask: map[int64][]events.BenchDone{}, logger: slog.Default(), lastAt: time.Now()}
	ids := []int64{1, 2, 3, 4, 5}
	batch, err := json.Marshal([]events.BenchDone{{TaskID: 3, Attempt: 1, OK: true}, {TaskID: 1, Attempt: 1, OK: true}})
	require.NoError(t, err)
	c.handle(&nats.Msg{Data: batch}) // a batch, as executors send them
	report(t, c, 2, false)           // a failed attempt is not a success
	report(t, c, 99, true)           // not one of ids

	done := make(chan error, 1)
	go func() { done <- c.wait(context.Background(), ids, time.Minute) }()
	for _, id := range []int64{5, 2} {
		select {
		case err := <-done:
			t.Fatalf("wait ended with tasks pending: %v", err)
		case <-time.After(60 * time.Millisecond):
		}
		report(t, c, id, true)
	}
	select {
	case err := <-done:
		t.Fatalf("wait ended with task 4 pending: %v", err)
	case <-time.After(60 * time.Millisecond):
	}
	report(t, c, 4, true)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("wait did not end after the last success")
	}

	stalled := &collector{byTask: map[int64][]events.BenchDone{}, logger: slog.Default(), lastAt: time.Now()}
	report(t, stalled, 2, true)
	err = stalled.wait(context.Background(), []int64{1, 2, 3}, 30*time.Millisecond)
	require.ErrorContains(t, err, "2 of 3 tasks never reported success")
}
