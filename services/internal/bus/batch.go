package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"golang.org/x/sync/errgroup"

	"github.com/axsched/ax/services/internal/metrics"
)

// PullHeartbeat is the idle heartbeat JetStream sends on every long-lived
// pull request of ax's consumers (the executors' own lanes and the batch
// consumers below). Under a burst the client library was seen counting a
// pull request open that the server no longer held, so nothing was
// delivered until it missed two heartbeats: with its default (half the
// expiry) 5 s for an executor's lane, 30 s for a batch consumer. With this
// a lost pull is renewed within a second (counted by
// ax_pull_renewals_total).
const PullHeartbeat = 500 * time.Millisecond

// batchPullExpiry is how long a batch consumer's pull request lasts
// (the library's default is 30 s).
const batchPullExpiry = 5 * time.Second

// BatchHandler handles messages that arrived together. A nil error
// acknowledges all of them; an error hands them all back for redelivery
// after a short delay, so a handler must be idempotent per message.
type BatchHandler func(ctx context.Context, msgs []jetstream.Msg) error

// ConsumeBatches consumes spec's durable consumer in batches until ctx
// ends: a worker takes the first waiting message and whatever else has
// already arrived, up to max, and handles them at once. Under load a batch
// fills up and its cost (one MySQL transaction, one Redis pipeline) is
// shared by many messages; when idle a message waits for nothing.
// spec.Parallel workers handle batches concurrently.
func ConsumeBatches(ctx context.Context, js jetstream.JetStream, spec ConsumerSpec, max int, logger *slog.Logger, handle BatchHandler) error {
	spec = spec.withDefaults()
	c, err := spec.declare(ctx, js)
	if err != nil {
		return err
	}
	in := make(chan jetstream.Msg, 2*max)
	cc, err := c.Consume(func(m jetstream.Msg) {
		select {
		case in <- m:
		case <-ctx.Done():
			// Not acknowledged: redelivered after AckWait to whoever runs.
		}
	}, jetstream.PullMaxMessages(2*max), jetstream.PullExpiry(batchPullExpiry), jetstream.PullHeartbeat(PullHeartbeat),
		jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
			if errors.Is(err, jetstream.ErrNoHeartbeat) {
				metrics.PullRenewals.Inc()
				return
			}
			logger.Debug("consume", "consumer", spec.Name, "err", err)
		}))
	if err != nil {
		return fmt.Errorf("consume %s: %w", spec.Name, err)
	}
	if spec.Declared != nil {
		spec.Declared()
	}
	g, gctx := errgroup.WithContext(ctx)
	for range spec.Parallel {
		g.Go(func() error {
			for {
				var batch []jetstream.Msg
				select {
				case <-gctx.Done():
					return nil
				case m := <-in:
					batch = append(batch, m)
				}
			more:
				for len(batch) < max {
					select {
					case m := <-in:
						batch = append(batch, m)
					default:
						break more
					}
				}
				// Past its ack wait the batch is redelivered anyway: a
				// handler stuck on a server that stopped answering gives up
				// then, and hands it back, instead of waiting for the
				// driver's read timeout.
				hctx, cancel := context.WithTimeout(gctx, spec.AckWait)
				err := handle(hctx, batch)
				cancel()
				if err != nil {
					if gctx.Err() == nil {
						logger.Warn("batch failed; redelivering", "consumer", spec.Name, "messages", len(batch), "err", err)
					}
					for _, m := range batch {
						_ = m.NakWithDelay(250 * time.Millisecond)
					}
					continue
				}
				for _, m := range batch {
					_ = m.Ack()
				}
			}
		})
	}
	err = g.Wait()
	cc.Stop()
	// Hand back what arrived but was not handled, so another replica takes
	// it at once instead of after AckWait.
	for {
		select {
		case m := <-in:
			_ = m.Nak()
		default:
			return err
		}
	}
}
