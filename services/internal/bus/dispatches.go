package bus

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/events"
)

// Dispatch is one task's dispatch taken from a message on an executor
// subject, with the handle its verdict goes to: the message itself, or,
// for a task that came with others (events.TaskDispatches), its part of
// the message.
type Dispatch struct {
	Task events.TaskDispatched
	Msg  jetstream.Msg
}

// Dispatches reads the dispatches m carries: one (events.TaskDispatched)
// or several (events.TaskDispatches, told by the event type header). Each
// part of a batch answers for its task as if it were the message:
//
//   - m is acknowledged once every part has its verdict (Ack or Term);
//   - a part handed back at once (Nak: its executor stops, or its type got
//     a cluster-wide limit meanwhile) is published again alone, on m's
//     subject through js, and then counts as done, so it does not wait for
//     the others (a running task may take minutes); if that publish fails
//     (or js is nil), it counts as handed back after a delay:
//   - if any part was handed back after a delay (NakWithDelay: a claim that
//     failed on an error or met a live claim in flight, a type at its
//     limit), the whole of m is, once every part has its verdict, after
//     the longest delay asked for: its other tasks come back too and lose
//     their repeated claims, fenced on the attempt and due time;
//   - InProgress of any part keeps m alive (at most one a second reaches
//     JetStream);
//   - a part's second verdict is ignored.
//
// A part left without a verdict holds m only while another part keeps it
// alive; then m comes back after its ack wait, as a lost message does.
func Dispatches(m jetstream.Msg, js jetstream.JetStream) ([]Dispatch, error) {
	if m.Headers().Get(events.HeaderEventType) != events.TypeTaskDispatches {
		var d Dispatch
		if err := events.Decode(m.Data(), &d.Task); err != nil {
			return nil, err
		}
		d.Msg = m
		return []Dispatch{d}, nil
	}
	var b events.TaskDispatches
	if err := events.Decode(m.Data(), &b); err != nil {
		return nil, err
	}
	if len(b.Tasks) == 0 {
		return nil, fmt.Errorf("decode %T: no tasks", b)
	}
	shared := &batchMsg{Msg: m, open: len(b.Tasks), js: js}
	out := make([]Dispatch, len(b.Tasks))
	for i := range b.Tasks {
		out[i] = Dispatch{Task: b.Tasks[i], Msg: &partMsg{batchMsg: shared, task: b.Tasks[i]}}
	}
	return out, nil
}

// DispatchMsg is the message of one task's dispatch on subject, carrying
// traceParent (if any) in its header.
func DispatchMsg(subject string, task events.TaskDispatched, traceParent string) (Msg, error) {
	data, err := events.Encode(task)
	if err != nil {
		return Msg{}, fmt.Errorf("encode dispatch of task %d: %w", task.TaskID, err)
	}
	return Msg{Subject: subject, EventType: events.TypeTaskDispatched,
		CorrelationID: strconv.FormatInt(task.TaskID, 10), Data: data, TraceParent: traceParent}, nil
}

// keepEvery bounds how often the parts of one batch forward InProgress.
const keepEvery = time.Second

// batchMsg is a message of several dispatches, waiting for its parts'
// verdicts.
type batchMsg struct {
	jetstream.Msg
	js       jetstream.JetStream // publishes a part handed back at once
	mu       sync.Mutex
	open     int           // parts without a verdict
	again    bool          // a part was handed back
	delay    time.Duration // the longest delay a hand-back asked for
	lastKeep time.Time
}

// partMsg is one task's share of a batchMsg. Metadata, Data, Headers,
// Subject and Reply are the message's.
type partMsg struct {
	*batchMsg
	task events.TaskDispatched
	done bool // guarded by batchMsg.mu
}

// republishWait bounds the publish of a part handed back at once.
const republishWait = 2 * time.Second

// Nak hands the part back at once: published again alone, it no longer
// waits for the rest of its message.
func (p *partMsg) Nak() error {
	if p.js == nil {
		return p.verdict(true, 0)
	}
	p.batchMsg.mu.Lock()
	done := p.done
	p.batchMsg.mu.Unlock()
	if done {
		return nil
	}
	m, err := DispatchMsg(p.Subject(), p.task, "")
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), republishWait)
		err = PublishBatch(ctx, p.js, []Msg{m})
		cancel()
	}
	if err != nil {
		return p.verdict(true, 0)
	}
	return p.verdict(false, 0)
}

// verdict records the part's verdict (again: handed back after delay) and
// answers the message once it was the last.
func (p *partMsg) verdict(again bool, delay time.Duration) error {
	b := p.batchMsg
	b.mu.Lock()
	if p.done {
		b.mu.Unlock()
		return nil
	}
	p.done = true
	b.open--
	if again {
		b.again = true
		b.delay = max(b.delay, delay)
	}
	last, handBack, wait := b.open == 0, b.again, b.delay
	b.mu.Unlock()
	switch {
	case !last:
		return nil
	case !handBack:
		return b.Msg.Ack()
	case wait > 0:
		return b.Msg.NakWithDelay(wait)
	default:
		return b.Msg.Nak()
	}
}

func (p *partMsg) Ack() error                             { return p.verdict(false, 0) }
func (p *partMsg) DoubleAck(context.Context) error        { return p.verdict(false, 0) }
func (p *partMsg) Term() error                            { return p.verdict(false, 0) }
func (p *partMsg) TermWithReason(string) error            { return p.verdict(false, 0) }
func (p *partMsg) NakWithDelay(delay time.Duration) error { return p.verdict(true, delay) }

// InProgress keeps the message alive while the part waits for its
// verdict.
func (p *partMsg) InProgress() error {
	b := p.batchMsg
	now := time.Now()
	b.mu.Lock()
	if p.done || now.Sub(b.lastKeep) < keepEvery {
		b.mu.Unlock()
		return nil
	}
	b.lastKeep = now
	b.mu.Unlock()
	return b.Msg.InProgress()
}
