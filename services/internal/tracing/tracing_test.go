package tracing

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"
)

const caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

func TestParseAndFormat(t *testing.T) {
	for _, tc := range []struct {
		tp    string
		valid bool
	}{
		{caller, true},
		{"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00", true}, // not sampled, still a context
		{"", false},
		{"garbage", false},
		{"00-00000000000000000000000000000000-b7ad6b7169203331-01", false}, // zero trace ID
		{"00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", false}, // zero span ID
		{"00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01", false}, // upper case
	} {
		sc, ok := Parse(tc.tp)
		require.Equal(t, tc.valid, ok, "%q", tc.tp)
		require.Equal(t, tc.valid, Valid(tc.tp), "%q", tc.tp)
		if ok {
			require.Equal(t, tc.tp, Format(sc), "round trip")
		}
	}
	require.Empty(t, Format(trace.SpanContext{}))
}

func TestEndpointURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://localhost:4318":                "http://localhost:4318/v1/traces",
		"http://localhost:4318/":               "http://localhost:4318/v1/traces",
		"localhost:4318":                       "http://localhost:4318/v1/traces",
		"https://otel.example:443/custom/path": "https://otel.example:443/custom/path",
	} {
		got, err := endpointURL(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	_, err := endpointURL("http://")
	require.Error(t, err)
}

// TestOffPassesTheCallersContextOn: with tracing off nothing is recorded,
// yet a span started under a caller's context carries it, so what the
// caller sent reaches the next hop and the handler.
func TestOffPassesTheCallersContextOn(t *testing.T) {
	require.False(t, Enabled())
	ctx, span := Start(context.Background(), caller, "x")
	require.False(t, span.IsRecording())
	require.Equal(t, caller, Current(ctx))
	require.Equal(t, caller, Child(caller, "x", trace.SpanKindInternal))
	require.Empty(t, Child("", "x", trace.SpanKindInternal))
	require.Equal(t, "", Current(context.Background()))
}

// TestWithParentPrefersASpanOfTheSameTrace: a transfer made under the
// run's span is the run's child, not the submit span's.
func TestWithParentPrefersASpanOfTheSameTrace(t *testing.T) {
	run, _ := Parse("00-0af7651916cd43dd8448eb211c80319c-1111111111111111-01")
	ctx := trace.ContextWithSpanContext(context.Background(), run)
	require.Equal(t, run.SpanID(), trace.SpanContextFromContext(WithParent(ctx, caller)).SpanID())
	other := "00-11111111111111111111111111111111-2222222222222222-01"
	require.Equal(t, other, Format(trace.SpanContextFromContext(WithParent(ctx, other))))
	require.Equal(t, ctx, WithParent(ctx, "bad"))
}
