package executor

import (
	"context"
	"time"
)

// takeLimited claims the best waiting task of a type with a cluster-wide
// concurrency limit, once the type's running set has room. Waiting for
// room before picking, rather than picking and then waiting, is what keeps
// the lanes' order under a limit: the task that takes a freed slot is the
// best one waiting when it is freed (a higher lane's first, aging aside),
// and one that loses the slot to another executor's claim goes back to the
// front of its lane in this fetcher, unclaimed: no RETRYING, no attempt
// spent, no place lost. It returns false when ctx ended.
func (in *intake) takeLimited(ctx context.Context, queues [][]*head) bool {
	select {
	case in.p.slots <- struct{}{}:
	default:
		if !in.waitSlot(ctx, queues) {
			return false
		}
	}
	for {
		if !in.waitRoom(ctx, queues) {
			<-in.p.slots
			return false
		}
		hs := in.next(ctx, queues, 1, nil)
		if len(hs) == 0 {
			<-in.p.slots
			return false
		}
		if !in.e.take(ctx, in.p, hs[0]) {
			return true
		}
		in.unpick(queues, hs[0])
	}
}

// waitRoom waits until the type's running set has room (or its limit was
// lifted), keeping the held messages alive; false means ctx ended. A
// running set Redis cannot be asked about counts as having room: the claim
// then reports the error and the task is redelivered shortly.
func (in *intake) waitRoom(ctx context.Context, queues [][]*head) bool {
	wait := roomPoll
	for {
		limit := in.e.settings(ctx, in.p).Concurrency
		if limit <= 0 {
			return true
		}
		ok, err := in.e.hasRoom(ctx, in.p.spec.Name, limit)
		if ok || err != nil {
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-in.p.room:
		case <-t.C:
		}
		t.Stop()
		in.keepAlive(queues)
		wait = min(2*wait, roomPollMax)
	}
}

// unpick puts h back at the front of the queue of the source it came
// from, as if it had not been taken.
func (in *intake) unpick(queues [][]*head, h *head) {
	for i, src := range in.srcs {
		if src.subject == h.msg.Subject() {
			queues[i] = append([]*head{h}, queues[i]...)
			return
		}
	}
	_ = h.msg.Nak() // not one of ours: let JetStream deliver it again
}

// handBack returns every held message to JetStream at once and empties
// the queues.
func handBack(queues [][]*head) {
	for i, q := range queues {
		for _, h := range q {
			_ = h.msg.Nak()
		}
		queues[i] = nil
	}
}

// sleepCtx waits d; false means ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
