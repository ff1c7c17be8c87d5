package submitter

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/tracing"
)

// SpanSubmit names the span of accepting one task.
const SpanSubmit = "ax.submit"

// startSubmit starts the ax.submit span of nt and stores its context with
// the task, so every later span of the task, in any service, descends
// from it. The parent is the submission's traceparent field, else the
// request's header; without either the span starts the task's own trace.
// With tracing off no span is made and the caller's context, if any, is
// stored as it came.
func startSubmit(ctx context.Context, header string, nt *store.NewTask) (context.Context, trace.Span) {
	parent := nt.TraceParent
	if parent == "" && tracing.Valid(header) {
		parent = header
	}
	if !tracing.Enabled() {
		nt.TraceParent = parent
		return ctx, nil
	}
	// The request's context carries no span of its own (no HTTP
	// middleware traces), so the parent is the caller's or none.
	ctx, span := tracing.Start(trace.ContextWithSpanContext(ctx, trace.SpanContext{}), parent, SpanSubmit,
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("ax.task.type", nt.Type), attribute.String("ax.lane", string(nt.Priority))))
	nt.TraceParent = tracing.Current(ctx)
	return ctx, span
}

// startSubmits starts the span of every task of a batch: each task its
// own, under its own traceparent field, else under the request's header
// (the tasks then share the caller's trace), else as a new trace.
func startSubmits(ctx context.Context, header string, nts []store.NewTask) []trace.Span {
	spans := make([]trace.Span, len(nts))
	for i := range nts {
		_, spans[i] = startSubmit(ctx, header, &nts[i])
	}
	return spans
}

// endSubmit ends span with what became of the submission.
func endSubmit(span trace.Span, task *store.Task, dedup bool, err error) {
	if span == nil {
		return
	}
	if task != nil {
		span.SetAttributes(tracing.TaskAttrs(task.ID, task.Type)...)
		span.SetAttributes(attribute.Bool("ax.deduplicated", dedup))
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// SpanWorkflow names the span of accepting a workflow.
const SpanWorkflow = "ax.workflow.submit"

// startWorkflow starts the span of a workflow submission, under the
// request's traceparent header or as a new trace, and gives every step
// (and compensation) its context: a workflow is one trace, each step's
// spans under it. With tracing off the header, if any, is stored as it came.
func startWorkflow(ctx context.Context, header string, nw *store.NewWorkflow) trace.Span {
	parent := ""
	if tracing.Valid(header) {
		parent = header
	}
	var span trace.Span
	if tracing.Enabled() {
		ctx, span = tracing.Start(trace.ContextWithSpanContext(ctx, trace.SpanContext{}), parent, SpanWorkflow,
			trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attribute.String("ax.workflow.name", nw.Name),
				attribute.Int("ax.workflow.steps", len(nw.Steps))))
		parent = tracing.Current(ctx)
	}
	for i := range nw.Steps {
		nw.Steps[i].Task.TraceParent = parent
		if c := nw.Steps[i].Compensation; c != nil {
			c.TraceParent = parent
		}
	}
	return span
}

// endWorkflow ends span with what became of the submission.
func endWorkflow(span trace.Span, wf *store.Workflow, err error) {
	if span == nil {
		return
	}
	if wf != nil {
		span.SetAttributes(attribute.String("ax.workflow.id", strconv.FormatInt(wf.ID, 10)))
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
