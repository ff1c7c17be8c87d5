package bus

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/events"
)

// subscriber is a watermill message.Subscriber over one durable JetStream
// consumer. A subscription's output channel is closed only once no
// delivery callback can send on it any more: shutting down while messages
// arrive must not panic (sending on a closed channel), whatever the timing.
// A message the router has not acknowledged when the subscription stops is
// handed back for redelivery.
type subscriber struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	spec    ConsumerSpec
	logger  *slog.Logger
	closing chan struct{}
	once    sync.Once
	subs    sync.WaitGroup
}

// drainWait bounds how long a stopping subscription waits for the
// messages it pulled to be handed back.
const drainWait = 5 * time.Second

func newSubscriber(nc *nats.Conn, spec ConsumerSpec, logger *slog.Logger) (*subscriber, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("jetstream for consumer %s: %w", spec.Name, err)
	}
	return &subscriber{nc: nc, js: js, spec: spec, logger: logger, closing: make(chan struct{})}, nil
}

// Subscribe consumes the spec's durable consumer (topic is its subject)
// until ctx ends or the subscriber closes.
func (s *subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	select {
	case <-s.closing:
		return nil, fmt.Errorf("consumer %s: subscriber closed", s.spec.Name)
	default:
	}
	c, err := s.spec.declare(ctx, s.js)
	if err != nil {
		return nil, err
	}
	out := make(chan *message.Message)
	stop := make(chan struct{})
	// Callbacks send while holding gate for reading; the output closes
	// under it for writing, once stopped is set, so no send can follow.
	var gate sync.RWMutex
	stopped := false
	cc, err := c.Consume(func(msg jetstream.Msg) {
		gate.RLock()
		defer gate.RUnlock()
		if stopped {
			_ = msg.Nak()
			return
		}
		s.deliver(ctx, msg, out, stop)
	}, jetstream.PullMaxMessages(64))
	if err != nil {
		return nil, fmt.Errorf("consume %s on %s: %w", s.spec.Name, topic, err)
	}
	s.subs.Add(1)
	go func() {
		defer s.subs.Done()
		select {
		case <-ctx.Done():
		case <-s.closing:
		}
		close(stop) // callbacks waiting on the router give up
		// Drain hands what was pulled but not yet delivered to the
		// callback, which gives it back at once: stopped, it would wait
		// out AckWait on the server.
		cc.Drain()
		select {
		case <-cc.Closed():
		case <-time.After(drainWait):
			s.logger.Warn("consumer did not drain in time", "consumer", s.spec.Name)
		}
		gate.Lock()
		stopped = true
		close(out)
		gate.Unlock()
	}()
	return out, nil
}

// deliver hands one message to the router and settles it as the router's
// handler did: Ack, Nak after a short delay, or — when the subscription
// stops first — Nak at once, so another replica takes it.
func (s *subscriber) deliver(ctx context.Context, msg jetstream.Msg, out chan<- *message.Message, stop <-chan struct{}) {
	select {
	case <-stop:
		_ = msg.Nak()
		return
	default:
	}
	m := toMessage(msg)
	mctx, cancel := context.WithCancel(ctx)
	defer cancel()
	m.SetContext(mctx)
	select {
	case out <- m:
	case <-stop:
		_ = msg.Nak()
		return
	}
	select {
	case <-m.Acked():
		if err := msg.Ack(); err != nil {
			s.logger.Warn("ack", "consumer", s.spec.Name, "err", err)
		}
	case <-m.Nacked():
		_ = msg.NakWithDelay(250 * time.Millisecond)
	case <-stop:
		_ = msg.Nak()
	}
}

// Close stops every subscription, waits until their outputs are closed and
// closes the subscriber's connection.
func (s *subscriber) Close() error {
	s.once.Do(func() {
		close(s.closing)
		s.subs.Wait()
		_ = s.nc.Drain()
	})
	return nil
}

// toMessage keeps the event ID as the watermill UUID and every header as
// metadata.
func toMessage(msg jetstream.Msg) *message.Message {
	id := msg.Headers().Get(events.HeaderMsgID)
	if id == "" {
		id = watermill.NewShortUUID()
	}
	m := message.NewMessage(id, msg.Data())
	for k, v := range msg.Headers() {
		if len(v) > 0 {
			m.Metadata.Set(k, v[0])
		}
	}
	return m
}
