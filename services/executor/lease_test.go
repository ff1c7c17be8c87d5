package executor

import (
	"testing"
	"time"

	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/keys"
	"github.com/axsched/ax/services/internal/store"
)

// A claim takes its lease before it reads the task's row. A lean dispatch
// does not say the task's timeout, so the lease is sized by the type's and
// only a task whose own timeout gives another lease is resized after the
// claim: the common claim costs no second Redis round trip.
func TestLeaseIsSizedBeforeTheClaimAndResizedOnlyWhenTheRowDisagrees(t *testing.T) {
	const lockTTL = time.Minute
	e := &Executor{cfg: Config{Node: "n1", LockTTL: lockTTL}, keys: keys.New("ax")}
	p := &pool{spec: TypeSpec{Name: "t", Timeout: 7 * time.Minute}}
	tests := []struct {
		name        string
		dispatch    events.TaskDispatched
		typeTimeout time.Duration
		rowTimeout  time.Duration
		wantBefore  time.Duration
		wantResize  bool
		wantAfter   time.Duration
	}{
		{name: "lean, the type's timeout", dispatch: events.TaskDispatched{Load: true},
			typeTimeout: 5 * time.Minute, rowTimeout: 5 * time.Minute,
			wantBefore: 5*time.Minute + AbandonGrace, wantAfter: 5*time.Minute + AbandonGrace},
		{name: "lean, a longer timeout of its own", dispatch: events.TaskDispatched{Load: true},
			typeTimeout: 5 * time.Minute, rowTimeout: 20 * time.Minute,
			wantBefore: 5*time.Minute + AbandonGrace, wantResize: true, wantAfter: 20*time.Minute + AbandonGrace},
		{name: "lean, a shorter timeout of its own", dispatch: events.TaskDispatched{Load: true},
			typeTimeout: 5 * time.Minute, rowTimeout: 2 * time.Minute,
			wantBefore: 5*time.Minute + AbandonGrace, wantResize: true, wantAfter: 2*time.Minute + AbandonGrace},
		{name: "lean, both shorter than the lock TTL", dispatch: events.TaskDispatched{Load: true},
			typeTimeout: 10 * time.Second, rowTimeout: 20 * time.Second,
			wantBefore: lockTTL, wantAfter: lockTTL},
		{name: "lean, type settings unknown: the pool's", dispatch: events.TaskDispatched{Load: true},
			rowTimeout: 7 * time.Minute,
			wantBefore: 7*time.Minute + AbandonGrace, wantAfter: 7*time.Minute + AbandonGrace},
		{name: "full dispatch says the timeout", dispatch: events.TaskDispatched{TimeoutMs: (3 * time.Minute).Milliseconds()},
			typeTimeout: 5 * time.Minute, rowTimeout: 3 * time.Minute,
			wantBefore: 3*time.Minute + AbandonGrace, wantAfter: 3*time.Minute + AbandonGrace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := tt.dispatch
			d.TaskID, d.Type, d.Attempt = 42, "t", 2
			r := e.newRun(p, &head{task: d}, tt.typeTimeout)
			if r.lockTTL != tt.wantBefore {
				t.Fatalf("lease before the claim = %s, want %s", r.lockTTL, tt.wantBefore)
			}
			if r.lockVal != "n1:3" {
				t.Fatalf("lease value = %q, want the claiming attempt n1:3", r.lockVal)
			}
			resize := e.claimed(r, &store.RunFields{TimeoutMs: tt.rowTimeout.Milliseconds()})
			if resize != tt.wantResize || r.lockTTL != tt.wantAfter {
				t.Fatalf("after the claim: resize %v lease %s, want %v %s", resize, r.lockTTL, tt.wantResize, tt.wantAfter)
			}
		})
	}
}
