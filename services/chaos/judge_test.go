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
		{"on time", 0, "SUCCESS", ran(1), []call{{1, at(30), true}}, verdict{worst: 30 * time.Millisecond}},
		{"not done is lost", 0, "RUNNING", ran(1)[:1], []call{{1, at(30), false}}, verdict{lost: 1}},
		{"done without a successful call is lost", 0, "SUCCESS", ran(1), nil, verdict{lost: 1}},
		{"called before due", 0, "SUCCESS", ran(1), []call{{1, at(-5), true}}, verdict{early: 1, worst: 0}},
		{"a planned retry's delay counts from its backoff's end", 1, "SUCCESS", append(failedOnce, ran(2)...),
			[]call{{1, at(20), false}, {2, at(1650), true}}, verdict{worst: 50 * time.Millisecond}},
		{"a retry called before its backoff ended is early", 1, "SUCCESS", append(failedOnce, ran(2)...),
			[]call{{1, at(20), false}, {2, at(1200), true}}, verdict{early: 1}},
		{"a recovery explains a second call", 0, "SUCCESS", append(recovered, ran(2)...),
			[]call{{1, at(10), false}, {2, at(9000), true}}, verdict{dupExplained: 1, recoveries: 1, worst: 9 * time.Second}},
		{"a lease taken over explains a second call of its attempt", 0, "SUCCESS",
			[]row{{from: "READY", to: "RUNNING", attempt: 1, reason: "claimed by b; took over lease a:1"}, {from: "RUNNING", to: "SUCCESS", attempt: 1}},
			[]call{{1, at(10), false}, {1, at(8000), true}}, verdict{dupExplained: 1, recoveries: 1, worst: 8 * time.Second}},
		{"a refused fused claim explains a second call of its attempt", 0, "SUCCESS",
			append(ran(1), row{from: "SUCCESS", to: "SUCCESS", attempt: 1, reason: "rejected READY->RUNNING from attempt 0: the task is SUCCESS at attempt 1 (claimed by a)"}),
			[]call{{1, at(10), true}, {1, at(20), true}}, verdict{dupExplained: 1, recoveries: 1, worst: 20 * time.Millisecond}},
		{"one take-over explains one extra call, not two", 0, "SUCCESS",
			[]row{{from: "READY", to: "RUNNING", attempt: 1, reason: "claimed by c; took over lease b:1"}, {from: "RUNNING", to: "SUCCESS", attempt: 1}},
			[]call{{1, at(10), false}, {1, at(20), false}, {1, at(30), true}}, verdict{dupExplained: 1, dupUnexpl: 2, recoveries: 1, worst: 30 * time.Millisecond}},
		{"two calls of one attempt are unexplained", 0, "SUCCESS", ran(1),
			[]call{{1, at(10), false}, {1, at(20), true}}, verdict{dupUnexpl: 2, worst: 20 * time.Millisecond}},
		{"a call no transfer granted is unexplained", 0, "SUCCESS", ran(1),
			[]call{{1, at(10), true}, {2, at(20), true}}, verdict{dupUnexpl: 2, worst: 20 * time.Millisecond}},
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
