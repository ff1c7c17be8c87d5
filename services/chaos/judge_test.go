package chaos

import (
	"testing"
	"time"
)

// The checker's verdict on one task, from its history and its calls.
func TestJudge(t *testing.T) {
	due := time.UnixMilli(1_000_000)
	at := func(ms int) time.Time { return due.Add(time.Duration(ms) * time.Millisecond) }
	ran := func(attempt int) []row {
		return []row{{from: "READY", to: "RUNNING", attempt: attempt}, {from: "RUNNING", to: "SUCCESS", attempt: attempt}}
	}
	// A planned failure of attempt 1, retried 1.5 s after due + 100 ms.
	failedOnce := []row{{from: "READY", to: "RUNNING", attempt: 1}, {from: "RUNNING", to: "FAILED", attempt: 1},
		{from: "FAILED", to: "RETRYING", attempt: 1, next: due.Add(1600 * time.Millisecond).UnixMilli()},
		{from: "RETRYING", to: "READY", attempt: 1}}
	recovered := []row{{from: "READY", to: "RUNNING", attempt: 1}, {from: "RUNNING", to: "READY", attempt: 1}}
	for _, tc := range []struct {
		name   string
		fail   int
		status string
		hist   []row
		calls  []call
		want   verdict // lost, early, dupExplained, dupUnexpl, recoveries, worst
	}{
		{"on time", 0, "SUCCESS", ran(1), []call{{attempt: 1, start: at(30), ok: true}}, verdict{worst: 30 * time.Millisecond}},
		{"not done is lost", 0, "RUNNING", ran(1)[:1], []call{{attempt: 1, start: at(30), ok: false}}, verdict{lost: 1}},
		{"done without a successful call is lost", 0, "SUCCESS", ran(1), nil, verdict{lost: 1}},
		{"called before due", 0, "SUCCESS", ran(1), []call{{attempt: 1, start: at(-5), ok: true}}, verdict{early: 1, worst: 0}},
		{"a planned retry's delay counts from its backoff's end", 1, "SUCCESS", append(failedOnce, ran(2)...),
			[]call{{attempt: 1, start: at(20), ok: false}, {attempt: 2, start: at(1650), ok: true}}, verdict{worst: 50 * time.Millisecond}},
		{"a retry called before its backoff ended is early", 1, "SUCCESS", append(failedOnce, ran(2)...),
			[]call{{attempt: 1, start: at(20), ok: false}, {attempt: 2, start: at(1200), ok: true}}, verdict{early: 1}},
		{"a recovery explains a second call", 0, "SUCCESS", append(recovered, ran(2)...),
			[]call{{attempt: 1, start: at(10), ok: false}, {attempt: 2, start: at(9000), ok: true}}, verdict{dupExplained: 1, recoveries: 1, worst: 9 * time.Second}},
		{"a lease taken over explains a second call of its attempt", 0, "SUCCESS",
			[]row{{from: "READY", to: "RUNNING", attempt: 1, reason: "claimed by b; took over lease a:1"}, {from: "RUNNING", to: "SUCCESS", attempt: 1}},
			[]call{{attempt: 1, start: at(10), ok: false}, {attempt: 1, start: at(8000), ok: true}}, verdict{dupExplained: 1, recoveries: 1, worst: 8 * time.Second}},
		{"a refused fused claim explains a second call of its attempt", 0, "SUCCESS",
			append(ran(1), row{from: "SUCCESS", to: "SUCCESS", attempt: 1, reason: "rejected READY->RUNNING from attempt 0: the task is SUCCESS at attempt 1 (claimed by a)"}),
			[]call{{attempt: 1, start: at(10), ok: true}, {attempt: 1, start: at(20), ok: true}}, verdict{dupExplained: 1, recoveries: 1, worst: 20 * time.Millisecond}},
		{"one take-over explains one extra call, not two", 0, "SUCCESS",
			[]row{{from: "READY", to: "RUNNING", attempt: 1, reason: "claimed by c; took over lease b:1"}, {from: "RUNNING", to: "SUCCESS", attempt: 1}},
			[]call{{attempt: 1, start: at(10), ok: false}, {attempt: 1, start: at(20), ok: false}, {attempt: 1, start: at(30), ok: true}}, verdict{dupExplained: 1, dupUnexpl: 2, recoveries: 1, worst: 30 * time.Millisecond}},
		{"two calls of one attempt are unexplained", 0, "SUCCESS", ran(1),
			[]call{{attempt: 1, start: at(10), ok: false}, {attempt: 1, start: at(20), ok: true}}, verdict{dupUnexpl: 2, worst: 20 * time.Millisecond}},
		{"a call no transfer granted is unexplained", 0, "SUCCESS", ran(1),
			[]call{{attempt: 1, start: at(10), ok: true}, {attempt: 2, start: at(20), ok: true}}, verdict{dupUnexpl: 2, worst: 20 * time.Millisecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var v verdict
			judge(&v, acked{id: "1", due: due, w: work{Fail: tc.fail}}, tc.status, tc.hist, tc.calls)
			got := verdict{lost: v.lost, early: v.early, dupExplained: v.dupExplained, dupUnexpl: v.dupUnexpl,
				recoveries: v.recoveries, worst: v.worst}
			if got.lost != tc.want.lost || got.early != tc.want.early || got.dupExplained != tc.want.dupExplained ||
				got.dupUnexpl != tc.want.dupUnexpl || got.recoveries != tc.want.recoveries || got.worst != tc.want.worst {
				t.Errorf("got %+v, want %+v (notes %v)", got, tc.want, v.examples)
			}
		})
	}
}

// When each task may first start: as answered, from a workflow's first
// step's creation, and from the end of the parent's earliest successful
// call for a second step.
func TestDueOf(t *testing.T) {
	base := time.UnixMilli(2_000_000)
	at := func(ms int) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }
	calls := map[string][]call{
		"p": {{attempt: 1, start: at(0), ok: false}, {attempt: 2, start: at(100), ok: true, end: at(300)},
			{attempt: 2, start: at(150), ok: true, end: at(250)}, {attempt: 2, start: at(400), ok: true}},
		"failed": {{attempt: 1, start: at(0), ok: false}},
	}
	created := []row{{from: "", to: "READY", next: at(50).UnixMilli()}}
	for _, tc := range []struct {
		name string
		a    acked
		hist []row
		want time.Time
	}{
		{"answered", acked{id: "t", due: at(10)}, created, at(10)},
		{"a first step, from its creation", acked{id: "a"}, created, at(50)},
		{"a first step with no history yet", acked{id: "a"}, nil, time.Time{}},
		{"a second step, after the earliest successful answer", acked{id: "b", after: "p"}, nil, at(250)},
		{"a second step whose parent never succeeded", acked{id: "b", after: "failed"}, nil, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := dueOf(tc.a, tc.hist, calls); !got.Equal(tc.want) {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}
