// Command refund is a business team's whole executor: one task type, its
// payload as a struct, and a side effect done once per order.
package main

import (
	"context"
	"log"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/axsched/ax/services/executor"
	"github.com/axsched/ax/services/worker"
)

type refund struct {
	OrderID string `json:"order_id"`
	Cents   int64  `json:"cents"`
}

func main() {
	mux := executor.NewMux()
	mux.Use(executor.Logging(slog.Default()))
	mux.Handle("billing.refund", executor.Typed(func(ctx context.Context, t *executor.Task, r refund) error {
		return executor.Once(ctx, t, r.OrderID, func(ctx context.Context) error {
			slog.InfoContext(ctx, "refunding", "order_id", r.OrderID, "cents", r.Cents) // call the payment API here
			return nil
		})
	}), executor.WithTimeout(30*time.Second), executor.WithMaxRetries(5))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := worker.Run(ctx, worker.Config{NATSURL: os.Getenv("AX_NATS_URL")}, mux); err != nil {
		log.Fatal(err)
	}
}
