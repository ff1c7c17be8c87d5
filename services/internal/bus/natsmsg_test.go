package bus

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/events"
)

// TestNatsMsgHeaders: every field set goes in its header, one value each,
// and an unset field leaves its header out.
func TestNatsMsgHeaders(t *testing.T) {
	full := natsMsg(Msg{Subject: "s", ID: "id", EventType: "et", CorrelationID: "42", TraceParent: "tp", Data: []byte("d")})
	require.Equal(t, "s", full.Subject)
	require.Equal(t, []byte("d"), full.Data)
	require.Len(t, full.Header, 4)
	for k, v := range map[string]string{events.HeaderMsgID: "id", events.HeaderEventType: "et",
		events.HeaderCorrelationID: "42", events.HeaderTraceParent: "tp"} {
		require.Equal(t, []string{v}, full.Header.Values(k), k)
	}
	bare := natsMsg(Msg{Subject: "s", ID: "id"})
	require.Len(t, bare.Header, 1)
	require.Equal(t, "id", bare.Header.Get(events.HeaderMsgID))
	// A value added later must not overwrite its neighbour's.
	bare.Header.Add(events.HeaderMsgID, "x")
	full.Header.Add(events.HeaderEventType, "x")
	require.Equal(t, []string{"id"}, full.Header.Values(events.HeaderMsgID))
	require.Equal(t, []string{"et", "x"}, full.Header.Values(events.HeaderEventType))
	require.Equal(t, "42", full.Header.Get(events.HeaderCorrelationID))
}

// BenchmarkNatsMsg measures building one published message with the three
// headers every event carries.
func BenchmarkNatsMsg(b *testing.B) {
	m := Msg{Subject: "ax.task.ready.dispatch", ID: "0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
		EventType: events.TypeTaskTransferred, CorrelationID: "7345012345678901234", Data: []byte(`{}`)}
	b.ReportAllocs()
	for b.Loop() {
		_ = natsMsg(m)
	}
}
