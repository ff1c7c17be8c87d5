// Package dispatcher turns due commands into work for executors.
//
// "Redis suggests, the database decides": for every TaskDue command it
// re-reads the task in MySQL and passes it on only if it is still READY and
// due by the scheduler clock; everything else is dropped and counted. A
// passing task is published on its type's executor subject with the attempt
// it has now, so only a claim against that attempt can succeed, and is
// marked dispatched so the timer's reconciler leaves it alone.
//
// Replicas: any number may run; they share one durable consumer, and a
// duplicate dispatch is absorbed by the executor's lock and attempt check.
package dispatcher

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/clock"
	"github.com/axsched/ax/services/internal/metrics"
	"github.com/axsched/ax/services/internal/store"
)

// dueTolerance is how far ahead of the local estimate of the scheduler
// clock a popped task may be and still be waited for rather than dropped.
const dueTolerance = time.Second

// ConsumersDefault is how many due commands are handled at once by default.
const ConsumersDefault = 8

// Config tunes the dispatcher.
type Config struct {
	// Consumers is how many due commands are handled at once.
	Consumers int
}

// Dispatcher is the dispatcher service.
type Dispatcher struct {
	types  *store.TypeCache
	cfg    Config
	store  *store.Store
	conn   *bus.Conn
	clock  clock.Clock
	logger *slog.Logger
}

// New builds a dispatcher.
func New(cfg Config, st *store.Store, conn *bus.Conn, clk clock.Clock, logger *slog.Logger) *Dispatcher {
	if cfg.Consumers <= 0 {
		cfg.Consumers = ConsumersDefault
	}
	// A pause or resume reaches dispatch within a second.
	return &Dispatcher{types: store.NewTypeCache(st, time.Second), cfg: cfg, store: st, conn: conn, clock: clk, logger: logger.With("service", "dispatcher")}
}

// Run consumes due commands until ctx ends.
func (d *Dispatcher) Run(ctx context.Context) error {
	router, err := bus.NewRouter(d.logger)
	if err != nil {
		return err
	}
	err = bus.AddConsumer(router, d.conn.URL, bus.ConsumerSpec{
		Name: events.ConsumerDispatcher, Stream: events.StreamWork,
		Subject: events.SubjectDue, Parallel: d.cfg.Consumers,
	}, d.logger, d.handleDue)
	if err != nil {
		return err
	}
	return router.Run(ctx)
}

func (d *Dispatcher) handleDue(msg *message.Message) error {
	var due events.TaskDue
	if err := events.Decode(msg.Payload, &due); err != nil {
		d.logger.Error("dropping undecodable due command", "err", err)
		metrics.DispatchSkipped.WithLabelValues("undecodable").Inc()
		return nil
	}
	return d.Dispatch(msg.Context(), due.TaskID, due.Priority)
}

// Dispatch re-checks one task and, if it is READY, due and its type is not
// paused, hands it to the executors of its type on the given lane (the lane
// it was popped from; empty means the task's own).
func (d *Dispatcher) Dispatch(ctx context.Context, taskID int64, lane contracts.Priority) error {
	task, err := d.store.GetTask(ctx, taskID)
	if errors.Is(err, store.ErrNotFound) {
		metrics.DispatchSkipped.WithLabelValues("not_found").Inc()
		return nil
	}
	if err != nil {
		return err
	}
	if task.Status != contracts.StatusReady && task.Status != contracts.StatusRetrying {
		metrics.DispatchSkipped.WithLabelValues("not_ready").Inc()
		return nil
	}
	if early := time.Duration(task.NextRunTimeMs-d.clock.Now().UnixMilli()) * time.Millisecond; early > 0 {
		if early > dueTolerance {
			// Rescheduled since it was indexed; its READY event re-indexes it.
			metrics.DispatchSkipped.WithLabelValues("not_due").Inc()
			d.logger.Debug("task not due yet", "task_id", taskID, "due_in", early)
			return nil
		}
		// The timer popped it by Redis TIME; our estimate of that clock
		// lags by a hair. Wait rather than start early.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(early):
		}
	}
	if d.paused(ctx, task.Type) {
		// It stays READY and undispatched; resuming the type re-indexes it.
		metrics.DispatchSkipped.WithLabelValues("paused").Inc()
		return nil
	}
	if lane.Rank() < 0 {
		lane = task.Priority
	}
	if task.Status == contracts.StatusRetrying {
		// Its backoff has elapsed: it becomes READY (fenced, so a racing
		// dispatcher replica or a cancel wins cleanly) and goes on at once.
		attempt := task.Attempt
		_, err := d.store.Transfer(ctx, store.TransferParams{
			TaskID: task.ID, From: contracts.StatusRetrying, To: contracts.StatusReady, Attempt: &attempt,
			Reason: fmt.Sprintf("backoff elapsed; retry %d of %d", task.RetryCount, task.MaxRetries),
		})
		if errors.Is(err, store.ErrConflict) {
			metrics.DispatchSkipped.WithLabelValues("not_ready").Inc()
			return nil
		}
		if err != nil {
			return err
		}
	}
	data, err := json.Marshal(events.TaskDispatched{
		TaskID: task.ID, Type: task.Type, Attempt: task.Attempt, Payload: task.Payload,
		TimeoutMs: task.TimeoutMs, NextRunTimeMs: task.NextRunTimeMs,
		RetryCount: task.RetryCount, MaxRetries: task.MaxRetries,
	})
	if err != nil {
		return fmt.Errorf("encode dispatch of task %d: %w", taskID, err)
	}
	err = bus.PublishBatch(ctx, d.conn.JS, []bus.Msg{{
		Subject: events.ExecSubject(task.Type, lane), EventType: events.TypeTaskDispatched,
		CorrelationID: strconv.FormatInt(task.ID, 10), Data: data,
	}})
	if err != nil {
		return fmt.Errorf("dispatch task %d: %w", taskID, err)
	}
	metrics.Dispatched.WithLabelValues(task.Type).Inc()
	return d.store.MarkDispatched(ctx, task.ID, task.Attempt)
}

// paused reports whether a type is paused (cached for a second); when the
// type cannot be read it is treated as not paused (the executor's claim
// still re-checks the task).
func (d *Dispatcher) paused(ctx context.Context, taskType string) bool {
	t, err := d.types.Get(ctx, taskType)
	if err != nil {
		d.logger.Warn("cannot read task type; dispatching", "type", taskType, "err", err)
		return false
	}
	return t.Paused
}
