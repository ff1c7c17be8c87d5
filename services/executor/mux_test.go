package executor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recorder returns middleware that appends "name>" before and "<name" after
// the handler to calls, so tests can read the order a task went through.
func recorder(calls *[]string, name string) Middleware {
	return func(next Handler) Handler {
		return HandlerFunc(func(ctx context.Context, t *Task) error {
			*calls = append(*calls, name+">")
			err := next.Handle(ctx, t)
			*calls = append(*calls, "<"+name)
			return err
		})
	}
}

func TestMuxMiddlewareOrder(t *testing.T) {
	tests := []struct {
		name  string
		setup func(m *Mux, calls *[]string, h Handler)
		want  []string
	}{
		{
			name:  "no middleware",
			setup: func(m *Mux, _ *[]string, h Handler) { m.Handle("a.b", h) },
			want:  []string{"handler"},
		},
		{
			name: "one Use call, first is outermost",
			setup: func(m *Mux, calls *[]string, h Handler) {
				m.Use(recorder(calls, "1"), recorder(calls, "2"))
				m.Handle("a.b", h)
			},
			want: []string{"1>", "2>", "handler", "<2", "<1"},
		},
		{
			name: "several Use calls keep registration order",
			setup: func(m *Mux, calls *[]string, h Handler) {
				m.Use(recorder(calls, "1"))
				m.Use(recorder(calls, "2"))
				m.Use(recorder(calls, "3"))
				m.Handle("a.b", h)
			},
			want: []string{"1>", "2>", "3>", "handler", "<3", "<2", "<1"},
		},
		{
			name: "Use after Handle still wraps the handler",
			setup: func(m *Mux, calls *[]string, h Handler) {
				m.Use(recorder(calls, "1"))
				m.Handle("a.b", h)
				m.Use(recorder(calls, "2"))
			},
			want: []string{"1>", "2>", "handler", "<2", "<1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls []string
			h := HandlerFunc(func(context.Context, *Task) error {
				calls = append(calls, "handler")
				return nil
			})
			m := NewMux()
			tt.setup(m, &calls, h)

			specs := m.Specs()
			require.Len(t, specs, 1)
			require.NoError(t, specs[0].Handler.Handle(context.Background(), &Task{ID: 1, Type: "a.b"}))
			require.Equal(t, tt.want, calls)

			calls = nil
			require.NoError(t, m.Dispatch(context.Background(), &Task{ID: 2, Type: "a.b"}))
			require.Equal(t, tt.want, calls, "Dispatch runs the same chain as Specs")
		})
	}
}

func TestMuxSpecs(t *testing.T) {
	m := NewMux()
	var calls []string
	m.Use(recorder(&calls, "mw"))
	m.HandleFunc("sms.send", func(context.Context, *Task) error { return nil },
		WithTimeout(10*time.Second), WithMaxRetries(7), WithConcurrency(3))
	m.Handle("billing.refund-callback", noopHandler, WithTimeout(time.Minute))
	m.Handle("ax.noop", noopHandler)

	specs := m.Specs()
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	require.Equal(t, []string{"ax.noop", "billing.refund-callback", "sms.send"}, names, "sorted by name")

	tests := []struct {
		name        string
		spec        TypeSpec
		timeout     time.Duration
		maxRetries  int
		concurrency int
	}{
		{name: "ax.noop", spec: specs[0]},
		{name: "billing.refund-callback", spec: specs[1], timeout: time.Minute},
		{name: "sms.send", spec: specs[2], timeout: 10 * time.Second, maxRetries: 7, concurrency: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.Equal(t, tt.name, tt.spec.Name)
			require.Equal(t, tt.timeout, tt.spec.Timeout)
			require.Equal(t, tt.maxRetries, tt.spec.MaxRetries)
			require.Equal(t, tt.concurrency, tt.spec.Concurrency)

			calls = nil
			require.NoError(t, tt.spec.Handler.Handle(context.Background(), &Task{Type: tt.name}))
			require.Equal(t, []string{"mw>", "<mw"}, calls, "middleware already applied")
		})
	}
}

func TestMuxSpecsEmpty(t *testing.T) {
	require.Empty(t, NewMux().Specs())
	var zero Mux
	require.Empty(t, zero.Specs())
}

func TestMuxZeroValue(t *testing.T) {
	var m Mux
	m.Handle("a.b", noopHandler)
	require.NoError(t, m.Dispatch(context.Background(), &Task{Type: "a.b"}))
}

func TestMuxRegistrationPanics(t *testing.T) {
	tests := []struct {
		name     string
		register func(m *Mux)
		contains string
	}{
		{
			name:     "empty type",
			register: func(m *Mux) { m.Handle("", noopHandler) },
			contains: "task type is required",
		},
		{
			name:     "uppercase type",
			register: func(m *Mux) { m.Handle("SMS.Send", noopHandler) },
			contains: `"SMS.Send" is invalid`,
		},
		{
			name:     "subject wildcard in type",
			register: func(m *Mux) { m.HandleFunc("sms.*", noopHandler) },
			contains: `"sms.*" is invalid`,
		},
		{
			name: "duplicate Handle",
			register: func(m *Mux) {
				m.Handle("sms.send", noopHandler)
				m.Handle("sms.send", sleepHandler)
			},
			contains: `"sms.send" registered twice`,
		},
		{
			name: "duplicate across Handle and HandleFunc",
			register: func(m *Mux) {
				m.HandleFunc("sms.send", noopHandler)
				m.Handle("sms.send", noopHandler)
			},
			contains: `"sms.send" registered twice`,
		},
		{
			name:     "nil handler",
			register: func(m *Mux) { m.Handle("sms.send", nil) },
			contains: "nil handler",
		},
		{
			name:     "nil func",
			register: func(m *Mux) { m.HandleFunc("sms.send", nil) },
			contains: "nil function",
		},
		{
			name:     "nil middleware",
			register: func(m *Mux) { m.Use(Recover(), nil) },
			contains: "middleware 1 is nil",
		},
		{
			name: "middleware returning nil",
			register: func(m *Mux) {
				m.Use(func(Handler) Handler { return nil })
				m.Handle("sms.send", noopHandler)
			},
			contains: "returned a nil handler",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMux()
			var recovered any
			func() {
				defer func() { recovered = recover() }()
				tt.register(m)
			}()
			require.NotNil(t, recovered, "registration must panic")
			msg, ok := recovered.(string)
			require.True(t, ok, "panic value is a string, got %T", recovered)
			require.Contains(t, msg, tt.contains)
		})
	}
}

func TestMuxDuplicateKeepsFirst(t *testing.T) {
	m := NewMux()
	m.Handle("sms.send", noopHandler, WithMaxRetries(5))
	require.Panics(t, func() { m.Handle("sms.send", sleepHandler, WithMaxRetries(9)) })
	specs := m.Specs()
	require.Len(t, specs, 1)
	require.Equal(t, 5, specs[0].MaxRetries, "a refused registration changes nothing")
}

func TestMuxDispatch(t *testing.T) {
	errRefused := errors.New("refused")
	m := NewMux()
	var got []int64
	m.HandleFunc("sms.send", func(_ context.Context, task *Task) error {
		got = append(got, task.ID)
		return nil
	})
	m.HandleFunc("billing.refund", func(context.Context, *Task) error { return errRefused })

	tests := []struct {
		name      string
		task      Task
		wantErr   error
		permanent bool
		contains  string
	}{
		{name: "routes by type", task: Task{ID: 11, Type: "sms.send"}},
		{name: "handler error passes through", task: Task{ID: 12, Type: "billing.refund"}, wantErr: errRefused},
		{
			name: "unknown type is permanent", task: Task{ID: 13, Type: "sms.sned"},
			wantErr: ErrUnknownType, permanent: true, contains: `"sms.sned" (task 13)`,
		},
		{name: "empty type is unknown", task: Task{ID: 14}, wantErr: ErrUnknownType, permanent: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := m.Dispatch(context.Background(), &tt.task)
			if tt.wantErr == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tt.wantErr)
			require.Equal(t, tt.permanent, IsPermanent(err))
			require.Contains(t, err.Error(), tt.contains)
		})
	}
	require.Equal(t, []int64{11}, got)

	// The mux serves as a Handler through its Dispatch method.
	var h Handler = HandlerFunc(m.Dispatch)
	require.NoError(t, h.Handle(context.Background(), &Task{ID: 15, Type: "sms.send"}))
	require.Equal(t, []int64{11, 15}, got)
}

func TestMuxConcurrentUse(t *testing.T) {
	// Registration and dispatch from several goroutines must be race-free
	// under -race.
	m := NewMux()
	m.Handle("a.b", noopHandler)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			_ = m.Dispatch(context.Background(), &Task{Type: "a.b"})
			_ = m.Specs()
		}
	}()
	for i := range 20 {
		m.Use(func(next Handler) Handler { return next })
		m.Handle("c.d"+string(rune('a'+i)), noopHandler)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("dispatching goroutine did not finish")
	}
	require.Len(t, m.Specs(), 21)
}
