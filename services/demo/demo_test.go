package demo

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/executor"
)

func TestDemoHandlers(t *testing.T) {
	tests := []struct {
		name      string
		handler   executor.Handler
		payload   string
		attempt   int
		wantErr   bool
		permanent bool
	}{
		{name: "noop succeeds", handler: Noop, attempt: 1},
		{name: "sleep succeeds", handler: Sleep, payload: `{"ms":1}`, attempt: 1},
		{name: "sleep refuses a negative time", handler: Sleep, payload: `{"ms":-1}`, attempt: 1, wantErr: true},
		{name: "sleep refuses a malformed payload", handler: Sleep, payload: `{"ms":"x"}`, attempt: 1, wantErr: true},
		{name: "flaky fails within fail_times", handler: Flaky, payload: `{"fail_times":2}`, attempt: 2, wantErr: true},
		{name: "flaky succeeds past fail_times", handler: Flaky, payload: `{"fail_times":2}`, attempt: 3},
		{name: "flaky fails for good when asked", handler: Flaky, payload: `{"fail_times":1,"permanent":true}`, attempt: 1, wantErr: true, permanent: true},
		{name: "flaky's malformed payload is permanent", handler: Flaky, payload: `[`, attempt: 1, wantErr: true, permanent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.handler.Handle(context.Background(), &executor.Task{ID: 1, Attempt: tt.attempt, Payload: json.RawMessage(tt.payload)})
			require.Equal(t, tt.wantErr, err != nil, "error: %v", err)
			require.Equal(t, tt.permanent, executor.IsPermanent(err))
		})
	}
}

func TestSleepEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := Sleep.Handle(ctx, &executor.Task{ID: 1, Attempt: 1, Payload: json.RawMessage(`{"ms":60000}`)})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), 30*time.Second)
}

func TestTypesAreTheDemonstrationTypes(t *testing.T) {
	var names []string
	for _, s := range Types() {
		names = append(names, s.Name)
		require.NotNil(t, s.Handler, s.Name)
	}
	require.Equal(t, []string{TypeNoop, TypeSleep, TypeFlaky}, names)
}
