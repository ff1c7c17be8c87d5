package executor

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/testenv"
)

func TestBenchReportsEveryAttempt(t *testing.T) {
	conn := testenv.NATS(t)
	reports := make(chan *nats.Msg, 16)
	sub, err := conn.NC.ChanSubscribe(events.SubjectBenchDone, reports)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	require.NoError(t, conn.NC.Flush())
	ctx := withBenchConn(context.Background(), conn.NC)

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
			task := &Task{ID: int64(1000 + i), Type: TypeBench, Attempt: tt.attempt, Payload: json.RawMessage(tt.payload)}
			before := time.Now().UnixNano()
			err := Bench.Handle(ctx, task)
			if tt.wantOK {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
				require.Equal(t, tt.permanent, IsPermanent(err), "permanent")
			}
			select {
			case m := <-reports:
				var got events.BenchDone
				require.NoError(t, events.Decode(m.Data, &got))
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
	require.NoError(t, Bench.Handle(context.Background(), &Task{ID: 1, Attempt: 1}))
	require.Error(t, Bench.Handle(context.Background(), &Task{ID: 1, Attempt: 1, Payload: json.RawMessage(`{"fail_attempts":1}`)}))
}
