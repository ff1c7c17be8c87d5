package events_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
)

func TestTaskTransferredRoundTrip(t *testing.T) {
	in := events.TaskTransferred{EventID: "01J", TaskID: 1<<62 + 7, Type: "ax.noop", From: contracts.StatusReady,
		To: contracts.StatusRunning, Attempt: 2, Priority: contracts.PriorityHigh, NextRunTimeMs: 1700000000123,
		Reason: "claimed", Actor: "executor@n1", At: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw["task_id"].(string); !ok {
		t.Fatalf("task_id must travel as a string so JavaScript keeps all 64 bits: %s", data)
	}
	var out events.TaskTransferred
	if err := events.Decode(data, &out); err != nil {
		t.Fatal(err)
	}
	if out != in {
		t.Fatalf("round trip changed the event:\n in %+v\nout %+v", in, out)
	}
	if err := events.Decode([]byte(`{"task_id":12}`), &out); err == nil {
		t.Fatal("a numeric task_id must be refused")
	}
}

func TestSubjectsAndConsumerNames(t *testing.T) {
	tests := []struct{ got, want string }{
		{events.TaskEventSubject(contracts.StatusReady), "ax.events.task.ready"},
		{events.TransferSubject(contracts.StatusReady, events.RouteTimer), "ax.events.task.ready"},
		{events.TransferSubject(contracts.StatusReady, events.RouteDispatch), "ax.events.task.ready.now"},
		{events.TransferSubject(contracts.StatusReady, events.RouteDispatched), "ax.events.task.ready.now"},
		{events.TransferSubject(contracts.StatusRunning, events.RouteDispatch), "ax.events.task.running"},
		{events.TransferSubject(contracts.StatusRetrying, events.RouteTimer), "ax.events.task.retrying"},
		{events.ExecSubject("billing.refund", contracts.PriorityHigh, "n1-x"), "ax.work.exec.high.billing.refund.n1-x"},
		{events.ExecSubject("billing.refund", contracts.PriorityHigh, events.SharedToken), "ax.work.exec.high.billing.refund._"},
		{events.ExecDoorbell("billing.refund", "n1-x"), "ax.work.exec.*.billing.refund.n1-x"},
		{events.ExecConsumer("billing.refund", contracts.PriorityLow, "n1-x"), "exec_billing_refund_low_n1-x"},
	}
	for _, tc := range tests {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func BenchmarkEventEncodeDecode(b *testing.B) {
	in := events.TaskTransferred{EventID: "01M8V8XGN4E2PWNSTCTN2R2HKM", TaskID: 2128092041172955136, Type: "ax.noop",
		From: contracts.StatusReady, To: contracts.StatusRunning, Attempt: 1, Priority: contracts.PriorityNormal,
		NextRunTimeMs: 1700000000123, Reason: "claimed by host-1", Actor: "executor@host-1", At: time.Now()}
	b.ReportAllocs()
	for range b.N {
		data, err := events.Encode(in)
		if err != nil {
			b.Fatal(err)
		}
		var out events.TaskTransferred
		if err := events.Decode(data, &out); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEventDecodeRef: what the timer and dispatcher pay per READY
// event, decoding only the TaskRef fields of a full event.
func BenchmarkEventDecodeRef(b *testing.B) {
	data, err := json.Marshal(events.TaskTransferred{EventID: "01M8V8XGN4E2PWNSTCTN2R2HKM", TaskID: 2128092041172955136,
		Type: "ax.noop", From: contracts.StatusNone, To: contracts.StatusReady, Priority: contracts.PriorityNormal,
		NextRunTimeMs: 1700000000123, Reason: "submitted", Actor: "submitter@host-1", At: time.Now(), Route: events.RouteDispatch})
	if err != nil {
		b.Fatal(err)
	}
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var out events.TaskTransferred
			if err := events.Decode(data, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ref", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			var out events.TaskRef
			if err := events.Decode(data, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestTaskRefReadsTheEvent: the hot path's partial decode sees the same
// values as the full one.
func TestTaskRefReadsTheEvent(t *testing.T) {
	in := events.TaskTransferred{EventID: "e", TaskID: 2128092041172955136, Type: "ax.noop", To: contracts.StatusReady,
		Attempt: 3, Priority: contracts.PriorityLow, NextRunTimeMs: 1700000000123, At: time.Now(), Route: events.RouteDispatch}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var ref events.TaskRef
	if err := events.Decode(data, &ref); err != nil {
		t.Fatal(err)
	}
	want := events.TaskRef{TaskID: in.TaskID, Type: in.Type, To: in.To, Attempt: in.Attempt, Priority: in.Priority, NextRunTimeMs: in.NextRunTimeMs, Route: in.Route}
	if ref != want {
		t.Fatalf("decoded %+v, want %+v", ref, want)
	}
}

func TestParseExecSubject(t *testing.T) {
	tests := []struct {
		subject    string
		lane       contracts.Priority
		typ, token string
		ok         bool
	}{
		{"ax.work.exec.high.billing.refund.n1-x", contracts.PriorityHigh, "billing.refund", "n1-x", true},
		{"ax.work.exec.low.ax.noop._", contracts.PriorityLow, "ax.noop", "_", true},
		{"ax.work.exec.urgent.ax.noop._", "", "", "", false}, // no such lane
		{"ax.work.exec.high.noop", contracts.PriorityHigh, "noop", "", false},
		{"ax.work.exec.high.ax.noop.", "", "", "", false},
		{"ax.work.due", "", "", "", false},
	}
	for _, tc := range tests {
		lane, typ, token, ok := events.ParseExecSubject(tc.subject)
		if ok != tc.ok || (ok && (lane != tc.lane || typ != tc.typ || token != tc.token)) {
			t.Errorf("%s: got %q %q %q %v", tc.subject, lane, typ, token, ok)
		}
		if ok && events.ExecSubject(typ, lane, token) != tc.subject {
			t.Errorf("%s does not round-trip", tc.subject)
		}
	}
}

func TestNodeTokens(t *testing.T) {
	seen := map[string]string{}
	for _, node := range []string{"host-1", "host.1", "host_1", "HOST-1", "pod/ax-7", "a b", strings.Repeat("x", 80), strings.Repeat("x", 81), "节点"} {
		tok := events.NodeToken(node)
		if strings.ContainsAny(tok, ".*> _\t") || len(tok) > 48 {
			t.Errorf("%q: token %q is not a safe subject token", node, tok)
		}
		if other, dup := seen[tok]; dup {
			t.Errorf("%q and %q share token %q", node, other, tok)
		}
		seen[tok] = node
		if events.NodeToken(node) != tok {
			t.Errorf("%q: token not stable", node)
		}
	}
}

// TestCodecMatchesEncodingJSON: the codec of events and commands writes the
// bytes encoding/json writes and reads them back the same, so consumers in
// any language, and ax versions before it, see no difference.
func TestCodecMatchesEncodingJSON(t *testing.T) {
	at := time.Date(2026, 12, 3, 6, 4, 5, 123456789, time.FixedZone("x", 3600))
	odd := `a <b> & "c" é ` + "\u2028\x01\t"
	for _, tc := range []struct {
		name string
		v    any
		into func() any
	}{
		{"transferred", events.TaskTransferred{EventID: "01M8V8XGN4E2PWNSTCTN2R2HKM", TaskID: 2128092041172955136,
			Type: "ax.noop", From: contracts.StatusRunning, To: contracts.StatusFailed, Attempt: 3,
			Priority: contracts.PriorityHigh, NextRunTimeMs: 1700000000123, Reason: odd, Actor: "executor@h",
			At: at, Route: events.RouteDispatch}, func() any { return &events.TaskTransferred{} }},
		{"due, lean", events.TaskDue{TaskID: 7, Priority: contracts.PriorityLow, NextRunTimeMs: 5, Type: "ax.noop",
			Attempt: 2, Status: contracts.StatusRetrying}, func() any { return &events.TaskDue{} }},
		{"due, plain", events.TaskDue{TaskID: 7, NextRunTimeMs: 5}, func() any { return &events.TaskDue{} }},
		{"dispatched", events.TaskDispatched{TaskID: 9, Type: "t", Attempt: 1, NextRunTimeMs: 5, Load: true},
			func() any { return &events.TaskDispatched{} }},
		{"bench reports", []events.BenchDone{{TaskID: 1, Attempt: 1, StartNs: 2, EndNs: 3, OK: true}, {TaskID: 2}},
			func() any { return &[]events.BenchDone{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, err := json.Marshal(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			got, err := events.Encode(tc.v)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("encoded\n got %s\nwant %s", got, want)
			}
			a, b := tc.into(), tc.into()
			if err := json.Unmarshal(want, a); err != nil {
				t.Fatal(err)
			}
			if err := events.Decode(want, b); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("decoded\n got %+v\nwant %+v", b, a)
			}
		})
	}
	for _, bad := range []string{`{"task_id":12}`, `{"task_id":"x"}`, `{`, `{"attempt":"1"}`, `[]`, `{"task_id":"1"} x`} {
		var ref events.TaskRef
		if err := events.Decode([]byte(bad), &ref); err == nil {
			t.Errorf("Decode(%s) accepted what encoding/json refuses", bad)
		}
	}
}

func TestReadTransfers(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	a := events.TaskTransferred{EventID: "01A", TaskID: 1, Type: "t", From: contracts.StatusReady,
		To: contracts.StatusRunning, Attempt: 1, Reason: "claimed", At: at}
	b := a
	b.EventID, b.TaskID, b.From, b.To = "01B", 2, "", contracts.StatusReady
	b.Route = events.RouteDispatch
	one, err := events.Encode(a)
	if err != nil {
		t.Fatal(err)
	}
	many, err := events.Encode(events.TaskTransfers{Transfers: []events.TaskTransferred{a, b}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		eventType string
		data      []byte
		want      []events.TaskTransferred
		wantErr   bool
	}{
		{"one transfer", events.TypeTaskTransferred, one, []events.TaskTransferred{a}, false},
		{"no type header reads as one", "", one, []events.TaskTransferred{a}, false},
		{"several in order", events.TypeTaskTransfers, many, []events.TaskTransferred{a, b}, false},
		{"several read as one is refused", events.TypeTaskTransferred, []byte(`[1]`), nil, true},
		{"a batch that is not one", events.TypeTaskTransfers, []byte(`{"transfers":{}}`), nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prior := []events.TaskTransferred{{EventID: "kept"}}
			got, err := events.ReadTransfers(tc.eventType, tc.data, prior)
			if tc.wantErr {
				if err == nil || len(got) != 1 {
					t.Fatalf("want an error and out unchanged, got %v, %d events", err, len(got))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, append(prior, tc.want...)) {
				t.Fatalf("got %+v, want %+v after the one already there", got, tc.want)
			}
			refs, err := events.ReadTransfers[events.TaskRef](tc.eventType, tc.data, nil)
			if err != nil || len(refs) != len(tc.want) {
				t.Fatalf("as TaskRef: %v, %d refs", err, len(refs))
			}
			for i, r := range refs {
				if r.TaskID != tc.want[i].TaskID || r.To != tc.want[i].To || r.Route != tc.want[i].Route {
					t.Fatalf("ref %d = %+v, want the fields of %+v", i, r, tc.want[i])
				}
			}
		})
	}
}
