package executor

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/axsched/ax/services/internal/tracing"
)

// SpanRun names the span of one attempt's handler call.
const SpanRun = "ax.run"

// runSpan gives the handler's context the run's trace: with tracing on, an
// ax.run span (a child of the dispatch) that the returned function ends
// with the handler's error; off, the caller's context alone, so a handler
// that traces with its own provider still joins its submitter's trace.
// A handler starts child spans from its context as usual.
func (e *Executor) runSpan(ctx context.Context, r *run) (context.Context, func(error)) {
	if r.trace == "" {
		return ctx, func(error) {}
	}
	if !tracing.Enabled() {
		return tracing.WithParent(ctx, r.trace), func(error) {}
	}
	ctx, span := tracing.Start(ctx, r.trace, SpanRun, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(tracing.TaskAttrs(r.task.ID, r.task.Type)...),
		trace.WithAttributes(attribute.Int("ax.attempt", r.task.Attempt), attribute.String("ax.node", e.cfg.Node)))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}
}
