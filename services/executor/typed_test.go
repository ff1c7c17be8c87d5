package executor

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

type smsPayload struct {
	To   string `json:"to"`
	Body string `json:"body"`
}

func TestTyped(t *testing.T) {
	tests := []struct {
		name      string
		payload   string
		want      smsPayload
		decodeErr string // non-empty: decoding fails permanently with this text
	}{
		{name: "decodes", payload: `{"to":"+15550100","body":"hi"}`, want: smsPayload{To: "+15550100", Body: "hi"}},
		{name: "missing fields stay zero", payload: `{"to":"+15550100"}`, want: smsPayload{To: "+15550100"}},
		{name: "empty payload is the zero value", payload: ``},
		{name: "whitespace payload is the zero value", payload: " \n\t"},
		{name: "null payload is the zero value", payload: `null`},
		{name: "unknown field is permanent", payload: `{"to":"x","bdy":"typo"}`, decodeErr: `unknown field "bdy"`},
		{name: "wrong type is permanent", payload: `{"to":5}`, decodeErr: "cannot unmarshal number"},
		{name: "malformed JSON is permanent", payload: `{"to":`, decodeErr: "unexpected EOF"},
		{name: "not an object is permanent", payload: `[1,2]`, decodeErr: "cannot unmarshal array"},
		{name: "trailing data is permanent", payload: `{"to":"a"} {"to":"b"}`, decodeErr: "unexpected data after the JSON value"},
		{name: "trailing garbage is permanent", payload: `{"to":"a"}}`, decodeErr: "unexpected data after the JSON value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			called := false
			h := Typed(func(_ context.Context, task *Task, p smsPayload) error {
				called = true
				require.Equal(t, int64(77), task.ID, "the task is passed along")
				require.Equal(t, tt.want, p)
				return nil
			})
			err := h.Handle(context.Background(), &Task{ID: 77, Type: "sms.send", Payload: json.RawMessage(tt.payload)})
			if tt.decodeErr == "" {
				require.NoError(t, err)
				require.True(t, called)
				return
			}
			require.Error(t, err)
			require.False(t, called, "the function must not run on a bad payload")
			require.True(t, IsPermanent(err), "retrying cannot fix a malformed payload")
			require.Contains(t, err.Error(), "decode executor.smsPayload payload of task 77: ")
			require.Contains(t, err.Error(), tt.decodeErr)
		})
	}
}

func TestTypedPassesHandlerErrorThrough(t *testing.T) {
	errUpstream := errors.New("gateway unavailable")
	h := Typed(func(context.Context, *Task, smsPayload) error { return errUpstream })
	err := h.Handle(context.Background(), &Task{Payload: json.RawMessage(`{"to":"x"}`)})
	require.ErrorIs(t, err, errUpstream)
	require.False(t, IsPermanent(err), "the handler decides whether its own errors are permanent")
}

func TestTypedNonStructPayloads(t *testing.T) {
	t.Run("pointer payload is nil when null", func(t *testing.T) {
		var got *smsPayload = &smsPayload{To: "sentinel"}
		h := Typed(func(_ context.Context, _ *Task, p *smsPayload) error { got = p; return nil })
		require.NoError(t, h.Handle(context.Background(), &Task{Payload: json.RawMessage(`null`)}))
		require.Nil(t, got)
	})
	t.Run("map payload", func(t *testing.T) {
		var got map[string]int
		h := Typed(func(_ context.Context, _ *Task, p map[string]int) error { got = p; return nil })
		require.NoError(t, h.Handle(context.Background(), &Task{Payload: json.RawMessage(`{"a":1}`)}))
		require.Equal(t, map[string]int{"a": 1}, got)
	})
}

func TestTypedWithMux(t *testing.T) {
	m := NewMux()
	var got smsPayload
	m.Handle("sms.send", Typed(func(_ context.Context, _ *Task, p smsPayload) error { got = p; return nil }))
	require.NoError(t, m.Dispatch(context.Background(), &Task{Type: "sms.send", Payload: json.RawMessage(`{"body":"ok"}`)}))
	require.Equal(t, smsPayload{Body: "ok"}, got)
}

func TestTypedNilFunctionPanics(t *testing.T) {
	require.PanicsWithValue(t, "executor: Typed: nil function", func() { Typed[smsPayload](nil) })
}
