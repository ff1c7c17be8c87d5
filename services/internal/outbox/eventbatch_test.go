package outbox

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/store"
)

// transferRows makes n transfer rows on subject, event IDs prefix0, prefix1...
func transferRows(subject, prefix string, n int) []store.OutboxRow {
	rows := make([]store.OutboxRow, n)
	for i := range rows {
		id := fmt.Sprintf("%s%d", prefix, i)
		rows[i] = store.OutboxRow{EventID: id, Subject: subject, EventType: events.TypeTaskTransferred,
			CorrelationID: id, Payload: fmt.Appendf(nil, `{"event_id":%q}`, id)}
	}
	return rows
}

// shape describes messages as subject:eventIDs, in order.
func shape(t *testing.T, msgs []bus.Msg) []string {
	t.Helper()
	var out []string
	for _, m := range msgs {
		if m.EventType != events.TypeTaskTransferred && m.EventType != events.TypeTaskTransfers {
			out = append(out, m.Subject+":"+m.ID)
			continue
		}
		trs, err := events.ReadTransfers[events.TaskTransferred](m.EventType, m.Data, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := m.Subject + ":"
		for i, tr := range trs {
			if i > 0 {
				s += ","
			}
			s += tr.EventID
		}
		if len(trs) == 1 && (m.ID != trs[0].EventID || m.EventType != events.TypeTaskTransferred) {
			t.Fatalf("a transfer alone must travel as before: %+v", m)
		}
		out = append(out, s)
	}
	return out
}

func TestAppendEventsGroupsBySubject(t *testing.T) {
	traced := transferRows("ready", "t", 1)[0]
	traced.TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	other := store.OutboxRow{EventID: "o1", Subject: "type", EventType: events.TypeTaskTypeChanged, Payload: []byte(`{}`)}
	r, s := transferRows("ready", "r", 5), transferRows("success", "s", 3)
	// Transfers with long reasons: two fit in maxMessageBytes, not three.
	big := transferRows("ready", "b", 5)
	for i := range big {
		big[i].Payload = fmt.Appendf(nil, `{"event_id":%q,"reason":%q}`, big[i].EventID, strings.Repeat("x", maxMessageBytes/3))
	}
	// One task's RUNNING and SUCCESS, on two subjects.
	run, done := transferRows("running", "x-run", 1)[0], transferRows("success", "x-done", 1)[0]
	run.CorrelationID, done.CorrelationID = "x", "x"
	tests := []struct {
		name       string
		rows       []store.OutboxRow
		perMessage int
		want       []string
	}{
		{"one subject", r[:3], 64, []string{"ready:r0,r1,r2"}},
		{"alone travels as before", r[:1], 64, []string{"ready:r0"}},
		{"subjects apart, each in order", []store.OutboxRow{r[0], s[0], r[1], s[1], s[2]}, 64,
			[]string{"ready:r0,r1", "success:s0,s1,s2"}},
		{"cut at perMessage", r, 2, []string{"ready:r0,r1", "ready:r2,r3", "ready:r4"}},
		{"one per message", r[:3], 1, []string{"ready:r0", "ready:r1", "ready:r2"}},
		{"a traced transfer alone, after what came before it on its subject",
			[]store.OutboxRow{r[0], s[0], r[1], traced, r[2], s[1]}, 64,
			[]string{"ready:r0,r1", "success:s0,s1", "ready:t0", "ready:r2"}},
		{"other events alone", []store.OutboxRow{r[0], other, r[1]}, 64, []string{"ready:r0,r1", "type:o1"}},
		{"no message past maxMessageBytes", big, 64, []string{"ready:b0,b1", "ready:b2,b3", "ready:b4"}},
		{"a task's transfers in order across subjects", []store.OutboxRow{s[0], run, done, s[1]}, 64,
			[]string{"success:s0", "running:x-run0", "success:x-done0,s1"}},
		{"a task's transfers in order after a full message", []store.OutboxRow{r[0], r[1], run, r[2]}, 2,
			[]string{"ready:r0,r1", "running:x-run0", "ready:r2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := shape(t, appendEvents(nil, tc.rows, tc.perMessage, maxMessageBytes, nil))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAppendEventsMessageIDs(t *testing.T) {
	rows := transferRows("ready", "r", 6)
	ids := func(rows []store.OutboxRow, retry map[string]int) []string {
		var out []string
		for _, m := range appendEvents(nil, rows, 64, maxMessageBytes, retry) {
			out = append(out, m.ID)
		}
		return out
	}
	first := ids(rows[:4], nil)
	if !slices.Equal(first, ids(rows[:4], nil)) {
		t.Fatal("the same rows must give the same message IDs")
	}
	withHole := []store.OutboxRow{rows[0], rows[1], rows[3]}
	lateFilled := []store.OutboxRow{rows[0], rows[1], rows[2], rows[3]}
	if a, b := ids(withHole, nil), ids(lateFilled, nil); a[0] == b[0] {
		t.Fatalf("a message with one transfer more must not share its ID (%s): JetStream would drop it", a[0])
	}
	swapped := []store.OutboxRow{rows[0], rows[2], rows[1]}
	if a, b := ids(rows[:3], nil), ids(swapped, nil); a[0] == b[0] {
		t.Fatal("the ID must depend on every event ID in it, in order")
	}

	// Tried again with more rows read: the first attempt's messages again.
	retry := regroup(rows[:4], 64, maxMessageBytes, nil)
	again := ids(rows, retry)
	if !slices.Contains(again, first[0]) {
		t.Fatalf("tried again, the first attempt's message %s is not sent again: %q", first[0], again)
	}
	if got := shape(t, appendEvents(nil, rows, 64, maxMessageBytes, retry)); !slices.Equal(got, []string{"ready:r0,r1,r2,r3", "ready:r4,r5"}) {
		t.Fatalf("tried again: %q", got)
	}
}

// TestAppendEventsKeepsOrderRandomly: over random passes (tasks moving
// through subjects, some traced), every row goes out once, no message
// holds more than perMessage, and both each subject's and each task's rows
// are stored in history order.
func TestAppendEventsKeepsOrderRandomly(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	subjects := []string{"ready.now", "running", "success", "retrying.now", "ready"}
	for pass := range 500 {
		n, perMessage := 1+rng.IntN(300), 2+rng.IntN(20)
		rows := make([]store.OutboxRow, n)
		for i := range rows {
			task := fmt.Sprint(rng.IntN(1 + n/3))
			id := fmt.Sprintf("e%04d", i)
			rows[i] = store.OutboxRow{EventID: id, Subject: subjects[rng.IntN(len(subjects))],
				EventType: events.TypeTaskTransferred, CorrelationID: task,
				Payload: fmt.Appendf(nil, `{"event_id":%q,"task_id":%q}`, id, task)}
			if rng.IntN(20) == 0 {
				rows[i].TraceParent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
			}
		}
		var order []events.TaskTransferred
		for _, m := range appendEvents(nil, rows, perMessage, maxMessageBytes, nil) {
			trs, err := events.ReadTransfers[events.TaskTransferred](m.EventType, m.Data, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(trs) > 1 && len(m.Data) > maxMessageBytes {
				t.Fatalf("pass %d: a message of %d bytes", pass, len(m.Data))
			}
			if len(trs) > perMessage {
				t.Fatalf("pass %d: %d transfers in one message, at most %d", pass, len(trs), perMessage)
			}
			order = append(order, trs...)
		}
		if len(order) != n {
			t.Fatalf("pass %d: %d rows out of %d", pass, len(order), n)
		}
		lastOfSubject, lastOfTask := map[string]string{}, map[int64]string{}
		for _, tr := range order {
			row := rows[slices.IndexFunc(rows, func(r store.OutboxRow) bool { return r.EventID == tr.EventID })]
			if prev := lastOfSubject[row.Subject]; prev > tr.EventID {
				t.Fatalf("pass %d: %s after %s on %s", pass, tr.EventID, prev, row.Subject)
			}
			if prev := lastOfTask[tr.TaskID]; prev > tr.EventID {
				t.Fatalf("pass %d: task %d's %s after its %s", pass, tr.TaskID, tr.EventID, prev)
			}
			lastOfSubject[row.Subject], lastOfTask[tr.TaskID] = tr.EventID, tr.EventID
		}
	}
}

// TestAppendEventsWithinAServersBound: a server that accepts less than
// ax's bound lowers it; transfers that would travel two to a message
// travel alone, and none is dropped.
func TestAppendEventsWithinAServersBound(t *testing.T) {
	big := transferRows("ready", "b", 5)
	for i := range big {
		big[i].Payload = fmt.Appendf(nil, `{"event_id":%q,"reason":%q}`, big[i].EventID, strings.Repeat("x", maxMessageBytes/3))
	}
	half := messageBytes(maxMessageBytes / 2)
	got := shape(t, appendEvents(nil, big, 64, half, nil))
	want := []string{"ready:b0", "ready:b1", "ready:b2", "ready:b3", "ready:b4"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	// Forty transfers of ~330 bytes: six to a message of at most 2 KiB.
	small := transferRows("ready", "s", 40)
	for i := range small {
		small[i].Payload = fmt.Appendf(nil, `{"event_id":%q,"reason":%q}`, small[i].EventID, strings.Repeat("y", 300))
	}
	msgs := appendEvents(nil, small, 64, 2<<10, nil)
	for _, m := range msgs {
		if len(m.Data) > 2<<10 {
			t.Fatalf("a message of %d bytes, past the bound of 2 KiB", len(m.Data))
		}
	}
	sent := 0
	for _, g := range shape(t, msgs) {
		sent += strings.Count(g, ",") + 1
	}
	if len(msgs) != 7 || sent != 40 {
		t.Fatalf("%d transfers in %d messages, want 40 in 7", sent, len(msgs))
	}
}

func TestMessageBytes(t *testing.T) {
	for _, tc := range []struct {
		serverMax int64
		want      int
	}{
		{0, maxMessageBytes},                            // not known: ax's own bound
		{1 << 20, maxMessageBytes},                      // NATS's default, far above it
		{16 << 10, 16<<10 - headerRoom},                 // a server that accepts less
		{maxMessageBytes, maxMessageBytes - headerRoom}, // room for the headers
		{512, 0}, // nothing travels together
	} {
		if got := messageBytes(tc.serverMax); got != tc.want {
			t.Errorf("messageBytes(%d) = %d, want %d", tc.serverMax, got, tc.want)
		}
	}
}
