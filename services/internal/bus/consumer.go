package bus

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
)

// ConsumerSpec declares one durable JetStream consumer and how hard to work it.
type ConsumerSpec struct {
	// Name is the durable consumer name (see package events).
	Name string
	// Stream and Subject select what it consumes.
	Stream  string
	Subject string
	// Parallel is how many messages are handled at once.
	Parallel int
	// AckWait is how long a message may be in flight before redelivery.
	AckWait time.Duration
	// MaxDeliver bounds redeliveries; a message that keeps failing is
	// dropped and its task re-driven from MySQL by a reconciler.
	MaxDeliver int
	// Declared, when set, is called once the consumer is declared and
	// being pulled (ConsumeBatches only).
	Declared func()
}

func (spec ConsumerSpec) withDefaults() ConsumerSpec {
	if spec.Parallel <= 0 {
		spec.Parallel = 1
	}
	if spec.AckWait <= 0 {
		spec.AckWait = 30 * time.Second
	}
	if spec.MaxDeliver == 0 {
		spec.MaxDeliver = 20
	}
	return spec
}

// declare creates or updates the durable consumer spec describes.
func (spec ConsumerSpec) declare(ctx context.Context, js jetstream.JetStream) (jetstream.Consumer, error) {
	c, err := js.CreateOrUpdateConsumer(ctx, spec.Stream, jetstream.ConsumerConfig{
		Durable:       spec.Name,
		FilterSubject: spec.Subject,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       spec.AckWait,
		MaxDeliver:    spec.MaxDeliver,
		MaxAckPending: 20000,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("declare consumer %s on %s: %w", spec.Name, spec.Stream, err)
	}
	return c, nil
}

// NewRouter returns a watermill router with ax's standard middleware:
// panics become errors, the correlation ID (task ID) follows the message,
// and a failing handler is retried briefly before the message is nacked.
func NewRouter(logger *slog.Logger) (*message.Router, error) {
	r, err := message.NewRouter(message.RouterConfig{CloseTimeout: 10 * time.Second}, WatermillLogger(logger))
	if err != nil {
		return nil, fmt.Errorf("watermill router: %w", err)
	}
	r.AddMiddleware(
		middleware.Recoverer,
		middleware.CorrelationID,
		middleware.Retry{
			MaxRetries:      3,
			InitialInterval: 50 * time.Millisecond,
			MaxInterval:     time.Second,
			Multiplier:      2,
			Logger:          WatermillLogger(logger),
		}.Middleware,
	)
	return r, nil
}

// WatermillLogger adapts slog for watermill, demoting its per-message info
// lines to debug.
func WatermillLogger(logger *slog.Logger) watermill.LoggerAdapter {
	return watermill.NewSlogLoggerWithLevelMapping(logger, map[slog.Level]slog.Level{
		slog.LevelInfo: slog.LevelDebug,
	})
}

// AddConsumer binds spec to handler on router. The durable consumer is
// created or updated on first subscribe; Parallel handlers share it, each
// with its own pull subscription, over a connection of their own (closed
// when the router closes the subscriber).
func AddConsumer(router *message.Router, conn *Conn, spec ConsumerSpec, logger *slog.Logger, handler message.NoPublishHandlerFunc) error {
	spec = spec.withDefaults()
	nc, err := conn.Dial("ax-" + spec.Name)
	if err != nil {
		return fmt.Errorf("connect nats for consumer %s: %w", spec.Name, err)
	}
	sub, err := newSubscriber(nc, spec, logger)
	if err != nil {
		nc.Close()
		return err
	}
	for i := range spec.Parallel {
		router.AddConsumerHandler(fmt.Sprintf("%s-%d", spec.Name, i), spec.Subject, sub, handler)
	}
	return nil
}

// ExecAckWait is how long an executor may hold a fetched task message
// unacknowledged (it keeps held ones alive well within it). It is also how
// long the fetched but unclaimed work of a node that died — or froze with
// its connection open, holding what its long-lived pulls were sent — waits
// before it can be moved on, so it is short.
const ExecAckWait = 5 * time.Second

// ExecConsumerConfig is the durable consumer of one executor subject (a
// lane of a task type, for one node or shared). Executors and the reaper,
// which moves on the work left on a departed node's subjects, declare it
// alike.
func ExecConsumerConfig(taskType string, lane contracts.Priority, token string) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       events.ExecConsumer(taskType, lane, token),
		FilterSubject: events.ExecSubject(taskType, lane, token),
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ExecAckWait,
		MaxDeliver:    20,
		MaxAckPending: 20000,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		// A node that is gone stops pulling; its consumers go by
		// themselves an hour later (its messages stay in the stream, and
		// the reaper moves them on long before that).
		InactiveThreshold: time.Hour,
	}
}
