package bench

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/executor"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/testenv"
)

// benchReports subscribes to the reports before anything runs.
func benchReports(t *testing.T) (*bus.Conn, chan *nats.Msg) {
	t.Helper()
	conn := testenv.NATS(t)
	reports := make(chan *nats.Msg, 64)
	sub, err := conn.NC.ChanSubscribe(events.SubjectBenchDone, reports)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, conn.NC.Flush())
	return conn, reports
}

func TestBenchReportsEveryAttempt(t *testing.T) {
	conn, reports := benchReports(t)
	h := NewHandler(conn.NC)
	ctx := context.Background()

	tests := []struct {
		name      string
		payload   string
		attempt   int
		wantOK    bool
		permanent bool
	}{
		{name: "no payload succeeds", attempt: 1, wantOK: true},
		{name: "attempt within fail_attempts fails", payload: `{"fail_attempts":2}`, attempt: 2},
		{name: "attempt past fail_attempts succeeds", payload: `{"fail_attempts":2}`, attempt: 3, wantOK: true},
		{name: "malformed payload fails for good", payload: `{"fail_attempts":"x"}`, attempt: 1, permanent: true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			task := &executor.Task{ID: int64(1000 + i), Type: TypeBench, Attempt: tt.attempt, Payload: json.RawMessage(tt.payload)}
			before := time.Now().UnixNano()
			err := h.Handle(ctx, task)
			if tt.wantOK {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
				require.Equal(t, tt.permanent, executor.IsPermanent(err), "permanent")
			}
			select {
			case m := <-reports:
				var batch []events.BenchDone
				require.NoError(t, events.Decode(m.Data, &batch))
				require.Len(t, batch, 1, "alone, a report goes on its own after the wait")
				got := batch[0]
				require.Equal(t, task.ID, got.TaskID)
				require.Equal(t, tt.attempt, got.Attempt)
				require.Equal(t, tt.wantOK, got.OK)
				require.GreaterOrEqual(t, got.StartNs, before)
				require.GreaterOrEqual(t, got.EndNs, got.StartNs)
			case <-time.After(5 * time.Second):
				t.Fatal("no report on " + events.SubjectBenchDone)
			}
		})
	}
}

func TestBenchWithoutConnection(t *testing.T) {
	// Outside an executor there is nobody to report to; the outcome is the
	// same.
	h := NewHandler(nil)
	require.NoError(t, h.Handle(context.Background(), &executor.Task{ID: 1, Attempt: 1}))
	require.Error(t, h.Handle(context.Background(), &executor.Task{ID: 1, Attempt: 1, Payload: json.RawMessage(`{"fail_attempts":1}`)}))
}

// TestBenchReportsTravelInBatches: reports from handlers running at once
// each arrive exactly once; a full batch goes at once and the rest when the
// wait is over (or the executor flushes on its way out).
func TestBenchReportsTravelInBatches(t *testing.T) {
	conn, reports := benchReports(t)
	br := NewHandler(conn.NC)
	br.wait = time.Hour // only a full batch or the flush sends
	ctx := context.Background()

	const n = 2*reportBatch + 10
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			require.NoError(t, br.Handle(ctx, &executor.Task{ID: int64(5000 + i), Type: TypeBench, Attempt: 1}))
		}()
	}
	wg.Wait()
	read := func() []events.BenchDone {
		select {
		case m := <-reports:
			var batch []events.BenchDone
			require.NoError(t, events.Decode(m.Data, &batch))
			return batch
		case <-time.After(5 * time.Second):
			t.Fatal("no report message")
			return nil
		}
	}
	seen := map[int64]int{}
	for _, want := range []int{reportBatch, reportBatch} {
		batch := read()
		require.Len(t, batch, want, "a full batch goes at once")
		for _, r := range batch {
			seen[r.TaskID]++
		}
	}
	select {
	case <-reports:
		t.Fatal("the remainder went before the wait or the flush")
	case <-time.After(100 * time.Millisecond):
	}
	br.Flush()
	for _, r := range read() {
		seen[r.TaskID]++
	}
	require.Len(t, seen, n)
	for id, k := range seen {
		require.Equal(t, 1, k, "report of task %d", id)
	}
}
