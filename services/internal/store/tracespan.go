package store

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/services/internal/tracing"
)

// SpanTransfer names the span of one committed transfer.
const SpanTransfer = "ax.transfer"

// traceTransfers records a span for every committed step of a batch, in
// its task's trace, from the start of the transaction to now: the span of
// the service that made the transfer, whichever it is (the store is the one
// place every transfer passes). A step of a task without a trace context
// records none.
func (s *Store) traceTransfers(ctx context.Context, chains [][]TransferParams, out []ChainResult, began time.Time) {
	end := time.Now()
	for i, steps := range chains {
		if out[i].Err != nil {
			continue
		}
		for j, p := range steps {
			res := out[i].Results[j]
			s.transferSpan(ctx, res.TraceParent, transferRecord{taskID: p.TaskID, taskType: res.Type, from: p.From, to: p.To,
				attempt: res.Attempt, actor: p.Actor, reason: p.Reason}, began, end)
		}
	}
}

// traceCreations records the first transfer of every task a CreateTasks
// call created, like traceTransfers; under the submit span in ctx when
// there is one.
func (s *Store) traceCreations(ctx context.Context, nts []NewTask, out []BatchResult, began time.Time) {
	end := time.Now()
	for i, nt := range nts {
		if i >= len(out) || out[i].Deduplicated {
			continue
		}
		s.transferSpan(ctx, nt.TraceParent, transferRecord{taskID: nt.ID, taskType: nt.Type, to: nt.Status,
			actor: nt.Actor, reason: nt.Reason}, began, end)
	}
}

// transferSpan records one transfer's span, dated from the start of its
// transaction (it is made after the commit) to end. A task without a trace
// context records none.
func (s *Store) transferSpan(ctx context.Context, tp string, r transferRecord, began, end time.Time) {
	if tp == "" {
		return
	}
	_, span := tracing.Start(ctx, tp, SpanTransfer, trace.WithTimestamp(began),
		trace.WithAttributes(tracing.TaskAttrs(r.taskID, r.taskType)...),
		trace.WithAttributes(attribute.String("ax.to", string(r.to)),
			attribute.Int("ax.attempt", r.attempt), attribute.String("ax.actor", s.actorOr(r.actor)),
			attribute.String("ax.reason", Truncate(r.reason, 256))))
	if r.from != contracts.StatusNone {
		span.SetAttributes(attribute.String("ax.from", string(r.from)))
	}
	span.End(trace.WithTimestamp(end))
}
