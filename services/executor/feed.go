package executor

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/metrics"
)

// feed is a lane of the node's own subject pulled by one long-lived pull
// request (jetstream.Consume): JetStream sends the node its work as it is
// stored, so a task costs its delivery and its acknowledgement — no
// doorbell copy, no pull request and no "no more messages" reply of its
// own, and no round trip between the dispatch arriving and the fetcher
// seeing it. Only this node pulls its own subject, so what the feed holds
// is nobody else's to take. At most room dispatches wait in it; while it is
// full the consume callback blocks, so JetStream stops sending once the
// open pull request's batch (as many again, queued in the client library,
// where they cannot be kept alive) is delivered. Those are redelivered to
// this node if the pool stays full for longer than the ack wait; the
// duplicate loses at the claim.
type feed struct {
	held spill
	mu   sync.Mutex    // guards cc
	room chan struct{} // one token per dispatch held
	size int
	stop chan struct{}
	cc   jetstream.ConsumeContext // guarded by mu: revive replaces it
	// stopOnce guards close.
	stopOnce sync.Once
}

// feedPullExpiry is how long one pull request of a feed stays open (it is
// renewed before): short, so that a node frozen with its connection open
// stops being sent work soon, and what it was sent comes back after the ack
// wait (bus.ExecAckWait) for the reaper to move once the node counts as
// dead.
const feedPullExpiry = 5 * time.Second

// feedSize bounds the dispatches a feed holds, by the pool's size: enough for
// a claim batch per fetcher's worth of free slots without holding far more
// work than the node can start (held work waits, and its acknowledgement
// deadline must be kept alive).
func feedSize(concurrency int) int {
	return min(max(concurrency, 16), maxClaimBatch)
}

// startFeed consumes the own lane src into a feed, ringing in's bell on
// every arrival.
func (in *intake) startFeed(src source, size int) (*feed, error) {
	f := &feed{room: make(chan struct{}, size), stop: make(chan struct{}), size: size}
	if err := in.consume(f, src.c); err != nil {
		return nil, err
	}
	return f, nil
}

// consume starts (or restarts) f's long-lived pull on c.
func (in *intake) consume(f *feed, c jetstream.Consumer) error {
	cc, err := c.Consume(func(msg jetstream.Msg) {
		select {
		case <-f.stop:
			_ = msg.Nak()
			return
		default:
		}
		ds, err := bus.Dispatches(msg, in.e.conn.JS)
		if err != nil {
			in.e.logger.Error("dropping undecodable dispatch", "type", in.p.spec.Name, "err", err)
			_ = msg.Term()
			return
		}
		// A message of several dispatches takes room for each as it comes:
		// a batch larger than the room left is held part by part.
		for i, d := range ds {
			select {
			case f.room <- struct{}{}:
			case <-f.stop:
				for _, rest := range ds[i:] {
					_ = rest.Msg.Nak() // stopping: another executor takes it at once
				}
				return
			}
			now := time.Now()
			h := &head{msg: d.Msg, task: d.Task, fetchedAt: now, lastKeep: now}
			f.held.put([]*head{h})
			in.ring()
		}
	}, jetstream.PullMaxMessages(f.size), jetstream.PullExpiry(feedPullExpiry),
		jetstream.PullHeartbeat(bus.PullHeartbeat), jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			switch {
			case errors.Is(err, jetstream.ErrConsumerDeleted):
				in.e.logger.Warn("own lane's consumer was deleted; declaring it again", "type", in.p.spec.Name, "err", err)
			case errors.Is(err, jetstream.ErrNoHeartbeat):
				metrics.PullRenewals.Inc()
			default:
				in.e.logger.Debug("consume", "type", in.p.spec.Name, "err", err)
			}
		}))
	if err != nil {
		return fmt.Errorf("consume own lane of %s: %w", in.p.spec.Name, err)
	}
	f.mu.Lock()
	f.cc = cc
	f.mu.Unlock()
	return nil
}

// revive declares src's consumer again and restarts its feed when the
// consume ended by itself (its consumer was deleted: a stream re-created
// after a loss, or an operator); without it the node would stop taking the
// work routed to it while still counting as alive.
func (in *intake) revive(ctx context.Context, src source) {
	f := src.feed
	f.mu.Lock()
	cc := f.cc
	f.mu.Unlock()
	select {
	case <-cc.Closed():
	default:
		return
	}
	select {
	case <-f.stop:
		return
	default:
	}
	lane := contracts.Priorities[src.lane]
	c, err := in.e.conn.JS.CreateOrUpdateConsumer(ctx, events.StreamWork,
		bus.ExecConsumerConfig(in.p.spec.Name, lane, events.NodeToken(in.e.cfg.Node)))
	if err == nil {
		err = in.consume(f, c)
	}
	if err != nil {
		if ctx.Err() == nil {
			in.e.logger.Warn("restart own lane's consume", "type", in.p.spec.Name, "lane", lane, "err", err)
		}
		return
	}
	in.e.logger.Info("own lane's consume restarted", "type", in.p.spec.Name, "lane", lane)
}

// take removes and returns up to n of the oldest held dispatches.
func (f *feed) take(n int) []*head {
	out := f.held.take(n)
	for range out {
		<-f.room
	}
	return out
}

func (f *feed) len() int { return f.held.len() }

// keepAlive tells JetStream that dispatches held longer than keepAliveAge
// are still wanted.
func (f *feed) keepAlive(now time.Time) { f.held.keepAlive(now) }

// keepHeadsAlive reports progress of every head held longer than
// keepAliveAge at now.
func keepHeadsAlive(hs []*head, now time.Time) {
	for _, h := range hs {
		if now.Sub(h.lastKeep) > keepAliveAge {
			_ = h.msg.InProgress()
			h.lastKeep = now
		}
	}
}

// close ends the consume, waits for its callback to return, and hands
// every held message back (Nak) so that the hand-back of the node's queued
// work, or another executor, takes it at once.
func (f *feed) close(ctx context.Context) {
	f.stopOnce.Do(func() {
		close(f.stop)
		f.mu.Lock()
		cc := f.cc
		f.mu.Unlock()
		cc.Drain()
		select {
		case <-cc.Closed():
		case <-ctx.Done():
		}
		for _, h := range f.take(len(f.room)) {
			_ = h.msg.Nak()
		}
	})
}

// spill holds dispatches for any fetcher of an intake to take: what a
// feed's long-lived pull delivered, or what a fetch brought beyond what its
// fetcher asked for (intake.spills).
type spill struct {
	mu    sync.Mutex
	heads []*head
}

func (s *spill) put(hs []*head) {
	s.mu.Lock()
	s.heads = append(s.heads, hs...)
	s.mu.Unlock()
}

// take removes and returns up to n of the oldest dispatches held.
func (s *spill) take(n int) []*head {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := min(n, len(s.heads))
	if k == 0 {
		return nil
	}
	out := make([]*head, k)
	copy(out, s.heads)
	s.heads = s.heads[k:]
	return out
}

func (s *spill) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.heads)
}

// keepAlive tells JetStream that dispatches held longer than keepAliveAge
// are still wanted.
func (s *spill) keepAlive(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keepHeadsAlive(s.heads, now)
}
