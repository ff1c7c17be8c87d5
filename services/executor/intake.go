package executor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
)

const (
	// ackWait is how long a fetched message may stay unacknowledged; held
	// heads are kept alive with InProgress well before it runs out.
	ackWait      = 30 * time.Second
	keepAliveAge = 10 * time.Second
	// idleWait bounds a doorbell wait, in case a doorbell was lost.
	idleWait = time.Second
)

// intake pulls one task type's lanes.
type intake struct {
	e     *Executor
	p     *pool
	lanes []jetstream.Consumer
	bell  chan struct{}
	sub   *nats.Subscription
}

// head is a fetched message not yet taken.
type head struct {
	msg       jetstream.Msg
	task      events.TaskDispatched
	fetchedAt time.Time
	lastKeep  time.Time
}

func (e *Executor) newIntake(ctx context.Context, p *pool) (*intake, error) {
	in := &intake{e: e, p: p, bell: make(chan struct{}, 1)}
	for _, lane := range contracts.Priorities {
		c, err := e.conn.JS.CreateOrUpdateConsumer(ctx, events.StreamWork, jetstream.ConsumerConfig{
			Durable:       events.ExecConsumer(p.spec.Name, lane),
			FilterSubject: events.ExecSubject(p.spec.Name, lane),
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       ackWait,
			MaxDeliver:    20,
			MaxAckPending: 20000,
			DeliverPolicy: jetstream.DeliverAllPolicy,
		})
		if err != nil {
			return nil, fmt.Errorf("declare %s consumer for %s: %w", lane, p.spec.Name, err)
		}
		in.lanes = append(in.lanes, c)
	}
	sub, err := e.conn.NC.Subscribe(events.ExecDoorbell(p.spec.Name), func(*nats.Msg) { in.ring() })
	if err != nil {
		return nil, fmt.Errorf("doorbell for %s: %w", p.spec.Name, err)
	}
	in.sub = sub
	return in, nil
}

func (in *intake) ring() {
	select {
	case in.bell <- struct{}{}:
	default:
	}
}

func (in *intake) close() { _ = in.sub.Unsubscribe() }

// fetchLoop takes a pool slot, then the best waiting task, and claims it,
// until ctx ends. Heads it holds on exit are handed back at once.
func (in *intake) fetchLoop(ctx context.Context) error {
	heads := make([]*head, len(in.lanes))
	defer func() {
		for _, h := range heads {
			if h != nil {
				_ = h.msg.Nak()
			}
		}
	}()
	for {
		select {
		case in.p.slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		h := in.next(ctx, heads)
		if h == nil {
			<-in.p.slots
			return nil
		}
		in.e.take(ctx, in.p, h)
	}
}

// next returns the task to run next: the head of the highest lane, where a
// task overdue by k×AgingAfter counts k lanes higher. It blocks while every
// lane is empty and returns nil when ctx ends.
func (in *intake) next(ctx context.Context, heads []*head) *head {
	for {
		select {
		case <-in.bell: // drained before fetching; a later ring is new work
		default:
		}
		for i, c := range in.lanes {
			if heads[i] == nil {
				heads[i] = in.fetch(ctx, c)
			}
		}
		if best := in.pick(heads); best >= 0 {
			h := heads[best]
			heads[best] = nil
			return h
		}
		select {
		case <-ctx.Done():
			return nil
		case <-in.bell:
		case <-time.After(idleWait):
		}
	}
}

func (in *intake) fetch(ctx context.Context, c jetstream.Consumer) *head {
	if ctx.Err() != nil {
		return nil
	}
	batch, err := c.FetchNoWait(1)
	if err != nil {
		in.e.logger.Warn("fetch failed", "type", in.p.spec.Name, "err", err)
		return nil
	}
	for msg := range batch.Messages() {
		h := &head{msg: msg, fetchedAt: time.Now()}
		h.lastKeep = h.fetchedAt
		if err := events.Decode(msg.Data(), &h.task); err != nil {
			in.e.logger.Error("dropping undecodable dispatch", "type", in.p.spec.Name, "err", err)
			_ = msg.Term()
			return nil
		}
		return h
	}
	if err := batch.Error(); err != nil && !errors.Is(err, context.Canceled) {
		in.e.logger.Debug("fetch ended", "type", in.p.spec.Name, "err", err)
	}
	return nil
}

// pick chooses among the heads: the lowest effective lane wins, where a
// task overdue by k×AgingAfter is promoted k lanes (never above high); ties
// go to the task due first, then to the higher lane. So a task that waited
// long enough overtakes every task of a higher lane that became due after
// it. It also keeps long-held heads alive.
func (in *intake) pick(heads []*head) int {
	now := in.e.clock.Now().UnixMilli()
	aging := in.e.cfg.AgingAfter.Milliseconds()
	best := -1
	var bestLane int
	var bestDue int64
	for lane, h := range heads {
		if h == nil {
			continue
		}
		eff := lane
		if overdue := now - h.task.NextRunTimeMs; overdue > 0 {
			eff = max(0, lane-int(overdue/aging))
		}
		due := h.task.NextRunTimeMs
		if best < 0 || eff < bestLane || (eff == bestLane && due < bestDue) {
			best, bestLane, bestDue = lane, eff, due
		}
		if time.Since(h.lastKeep) > keepAliveAge {
			_ = h.msg.InProgress()
			h.lastKeep = time.Now()
		}
	}
	return best
}
