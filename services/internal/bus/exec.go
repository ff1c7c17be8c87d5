package bus

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
	"github.com/axsched/ax/services/internal/tracing"
)

// moveBatch bounds how many messages one round of MoveToDue handles.
const moveBatch = 500

// MoveToDue empties an executor consumer of what it can fetch now: every
// task message becomes a due command again, so the dispatcher re-checks the
// task and routes it to its shard's current owner, and is acknowledged
// only once that command is stored. Messages held unacknowledged by a
// client that died come back after ExecAckWait and are moved by a later
// call. It returns how many tasks it moved.
func MoveToDue(ctx context.Context, js jetstream.JetStream, c jetstream.Consumer, lane contracts.Priority) (int, error) {
	moved := 0
	for {
		batch, err := c.FetchNoWait(moveBatch)
		if err != nil {
			return moved, fmt.Errorf("fetch to move: %w", err)
		}
		var (
			msgs []jetstream.Msg
			dues []Msg
		)
		for m := range batch.Messages() {
			ds, err := Dispatches(m, nil) // moved whole: m itself is answered
			if err != nil {
				_ = m.Term() // undecodable: its tasks are re-driven from MySQL
				continue
			}
			for _, d := range ds {
				data, err := events.Encode(events.TaskDue{TaskID: d.Task.TaskID, Priority: lane, NextRunTimeMs: d.Task.NextRunTimeMs})
				if err != nil {
					return moved, fmt.Errorf("encode due command of task %d: %w", d.Task.TaskID, err)
				}
				dues = append(dues, Msg{Subject: events.SubjectDue, EventType: events.TypeTaskDue,
					CorrelationID: strconv.FormatInt(d.Task.TaskID, 10), Data: data, TraceParent: moveSpan(m, d.Task)})
			}
			msgs = append(msgs, m)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, context.Canceled) && len(msgs) == 0 {
			return moved, fmt.Errorf("fetch to move: %w", err)
		}
		if len(msgs) == 0 {
			return moved, nil
		}
		if err := PublishBatch(ctx, js, dues); err != nil {
			for _, m := range msgs {
				_ = m.Nak()
			}
			return moved, fmt.Errorf("move %d task(s) to due: %w", len(dues), err)
		}
		for _, m := range msgs {
			_ = m.Ack()
		}
		moved += len(dues)
	}
}

// SpanMove names the span of a dispatch taken off an executor's subject
// and handed back to the dispatcher.
const SpanMove = "ax.move"

// moveSpan records, in the task's trace, that its dispatch m was moved,
// and returns the context the due command carries.
func moveSpan(m jetstream.Msg, d events.TaskDispatched) string {
	var tp string
	if h := m.Headers(); h != nil {
		tp = h.Get(events.HeaderTraceParent)
	}
	if tp == "" || !tracing.Enabled() {
		return tp
	}
	return tracing.Child(tp, SpanMove, trace.SpanKindProducer,
		append(tracing.TaskAttrs(d.TaskID, d.Type), attribute.String("ax.move.from", m.Subject()))...)
}
