package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRecover(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name      string
		handler   Handler
		wantErr   error
		panicked  bool
		wantValue any
	}{
		{name: "no panic, no error", handler: noopHandler},
		{
			name:    "error passes through",
			handler: HandlerFunc(func(context.Context, *Task) error { return errBoom }),
			wantErr: errBoom,
		},
		{
			name:     "panic with a string",
			handler:  HandlerFunc(func(context.Context, *Task) error { panicInHandler("nil map write"); return nil }),
			panicked: true, wantValue: "nil map write",
		},
		{
			name:     "panic with an error unwraps to it",
			handler:  HandlerFunc(func(context.Context, *Task) error { panicInHandler(errBoom); return nil }),
			panicked: true, wantValue: errBoom, wantErr: errBoom,
		},
		{
			name: "runtime error",
			handler: HandlerFunc(func(_ context.Context, t *Task) error {
				var m map[string]int
				m[t.Type] = 1
				return nil
			}),
			panicked: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Recover()(tt.handler)
			var err error
			require.NotPanics(t, func() { err = h.Handle(context.Background(), &Task{ID: 1, Type: "a.b"}) })
			if !tt.panicked {
				require.Equal(t, tt.wantErr, err)
				return
			}
			var pe *PanicError
			require.ErrorAs(t, err, &pe)
			if tt.wantValue != nil {
				require.Equal(t, tt.wantValue, pe.Value)
			}
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			}
			require.False(t, IsPermanent(err), "a panic may be transient; retries decide")
			require.LessOrEqual(t, len(pe.Stack), MaxPanicStack)
			require.True(t, bytes.HasPrefix(pe.Stack, []byte("goroutine ")), "stack keeps its header:\n%s", pe.Stack)
			require.Contains(t, string(pe.Stack), "TestRecover", "stack shows where the panic happened")
			require.NotContains(t, string(pe.Stack), "runtime/debug.Stack", "recovery frames are trimmed")
			require.Contains(t, err.Error(), "handler panic: ")
		})
	}
}

// panicInHandler is a named frame the stack trace must show.
func panicInHandler(v any) { panic(v) }

func TestRecoverDeepStackIsTruncated(t *testing.T) {
	var recurse func(n int)
	recurse = func(n int) {
		if n == 0 {
			panic("deep")
		}
		recurse(n - 1)
	}
	h := Recover()(HandlerFunc(func(context.Context, *Task) error { recurse(200); return nil }))
	err := h.Handle(context.Background(), &Task{})
	var pe *PanicError
	require.ErrorAs(t, err, &pe)
	require.LessOrEqual(t, len(pe.Stack), MaxPanicStack)
	require.True(t, bytes.HasSuffix(pe.Stack, []byte("\n...stack truncated")))
	require.Contains(t, string(pe.Stack), "panic(", "the panic site survives truncation")
}

func TestRecoverPanicStack(t *testing.T) {
	tests := []struct {
		name  string
		stack string
		limit int
		want  string
	}{
		{
			name:  "trims recovery frames",
			stack: "goroutine 7 [running]:\nruntime/debug.Stack()\n\tstack.go:26\nmy.recover.func1()\n\tm.go:1\npanic({0x1, 0x2})\n\tpanic.go:9\nmy.handler()\n\th.go:3\n",
			limit: 1000,
			want:  "goroutine 7 [running]:\npanic({0x1, 0x2})\n\tpanic.go:9\nmy.handler()\n\th.go:3\n",
		},
		{
			name:  "no panic frame keeps everything",
			stack: "goroutine 7 [running]:\nmain.f()\n",
			limit: 1000,
			want:  "goroutine 7 [running]:\nmain.f()\n",
		},
		{
			name:  "cuts at a line boundary",
			stack: "goroutine 1 [running]:\n" + strings.Repeat("frame.of.some.length()\n", 10),
			limit: 90,
			want:  "goroutine 1 [running]:\nframe.of.some.length()\nframe.of.some.length()\n...stack truncated",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := panicStack([]byte(tt.stack), tt.limit)
			require.Equal(t, tt.want, string(got))
			require.LessOrEqual(t, len(got), tt.limit)
		})
	}
}

func TestLogging(t *testing.T) {
	const secret = "4111-1111-1111-1111"
	errDeclined := errors.New("card declined")
	tests := []struct {
		name      string
		handler   Handler
		wantLevel string
		wantMsg   string
		wantErr   error
	}{
		{name: "success logs info", handler: noopHandler, wantLevel: "INFO", wantMsg: "task succeeded"},
		{
			name:      "failure logs warn with err",
			handler:   HandlerFunc(func(context.Context, *Task) error { return errDeclined }),
			wantLevel: "WARN", wantMsg: "task failed", wantErr: errDeclined,
		},
		{
			name:      "permanent failure is marked",
			handler:   HandlerFunc(func(context.Context, *Task) error { return Permanent(errDeclined) }),
			wantLevel: "WARN", wantMsg: "task failed", wantErr: errDeclined,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			task := &Task{ID: 42, Type: "billing.charge", Attempt: 3,
				Payload: json.RawMessage(`{"card":"` + secret + `"}`)}

			err := Logging(logger)(tt.handler).Handle(context.Background(), task)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
			} else {
				require.NoError(t, err)
			}

			out := buf.String()
			require.NotContains(t, out, secret, "the payload must never be logged")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			require.Len(t, lines, 2, out)
			require.Contains(t, lines[0], "level=DEBUG")
			require.Contains(t, lines[0], `msg="task started"`)
			require.Contains(t, lines[1], "level="+tt.wantLevel)
			require.Contains(t, lines[1], `msg="`+tt.wantMsg+`"`)
			for _, attr := range []string{"task_id=42", "type=billing.charge", "attempt=3"} {
				require.Contains(t, lines[0], attr)
				require.Contains(t, lines[1], attr)
			}
			require.Contains(t, lines[1], "duration=")
			if tt.wantErr != nil {
				require.Contains(t, lines[1], `err="card declined"`)
				require.Contains(t, lines[1], "permanent="+map[bool]string{true: "true", false: "false"}[IsPermanent(err)])
			} else {
				require.NotContains(t, lines[1], "err=")
			}
		})
	}
}

func TestLoggingAboveDebugWritesOneLine(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil)) // Info and above
	require.NoError(t, Logging(logger)(noopHandler).Handle(context.Background(), &Task{ID: 1, Type: "a.b"}))
	require.Equal(t, 1, strings.Count(buf.String(), "\n"), buf.String())
}

func TestMiddlewareTiming(t *testing.T) {
	errFailed := errors.New("failed")
	tests := []struct {
		name    string
		handler Handler
		wantErr error
	}{
		{name: "success", handler: noopHandler},
		{name: "error is reported", handler: HandlerFunc(func(context.Context, *Task) error { return errFailed }), wantErr: errFailed},
		{
			name: "duration covers the handler",
			handler: HandlerFunc(func(context.Context, *Task) error {
				time.Sleep(20 * time.Millisecond)
				return nil
			}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			type observation struct {
				taskType string
				d        time.Duration
				err      error
			}
			var got []observation
			observe := func(taskType string, d time.Duration, err error) {
				got = append(got, observation{taskType, d, err})
			}
			start := time.Now()
			err := Timing(observe)(tt.handler).Handle(context.Background(), &Task{Type: "sms.send"})
			elapsed := time.Since(start)

			require.Equal(t, tt.wantErr, err)
			require.Len(t, got, 1)
			require.Equal(t, "sms.send", got[0].taskType)
			require.Equal(t, tt.wantErr, got[0].err)
			require.LessOrEqual(t, got[0].d, elapsed)
			if tt.name == "duration covers the handler" {
				require.GreaterOrEqual(t, got[0].d, 20*time.Millisecond)
			}
		})
	}
}

func TestMiddlewareTimingWithRecoverInside(t *testing.T) {
	var gotErr error
	m := NewMux()
	m.Use(Timing(func(_ string, _ time.Duration, err error) { gotErr = err }), Recover())
	m.HandleFunc("a.b", func(context.Context, *Task) error { panic("oops") })

	err := m.Dispatch(context.Background(), &Task{Type: "a.b"})
	var pe *PanicError
	require.ErrorAs(t, err, &pe)
	require.Same(t, err, gotErr, "Timing sees the recovered panic as the run's error")
}

func TestMiddlewareNilArgumentsPanic(t *testing.T) {
	require.PanicsWithValue(t, "executor: Logging: nil logger", func() { Logging(nil) })
	require.PanicsWithValue(t, "executor: Timing: nil observe function", func() { Timing(nil) })
}
