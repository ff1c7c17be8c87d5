package events_test

import (
	"encoding/json"
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
		{events.ExecSubject("billing.refund", contracts.PriorityHigh), "ax.work.exec.high.billing.refund"},
		{events.ExecDoorbell("billing.refund"), "ax.work.exec.*.billing.refund"},
		{events.ExecConsumer("billing.refund", contracts.PriorityLow), "exec_billing_refund_low"},
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
		data, err := json.Marshal(in)
		if err != nil {
			b.Fatal(err)
		}
		var out events.TaskTransferred
		if err := events.Decode(data, &out); err != nil {
			b.Fatal(err)
		}
	}
}
