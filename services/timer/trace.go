package timer

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/tracing"
)

// SpanIndex names the span of a task the timer indexed by its due time.
const SpanIndex = "ax.timer.index"

// traceIndexed records, in each traced task's trace, that the timer holds
// it until its due time.
func traceIndexed(refs []store.DueRef) {
	if !tracing.Enabled() {
		return
	}
	for _, r := range refs {
		if r.TraceParent == "" {
			continue
		}
		attrs := append(tracing.TaskAttrs(r.ID, r.Type), attribute.String("ax.status", string(r.Status)),
			attribute.Int("ax.attempt", r.Attempt), attribute.String("ax.lane", string(r.Priority)),
			attribute.String("ax.due", time.UnixMilli(r.NextRunTimeMs).UTC().Format(time.RFC3339Nano)))
		tracing.Child(r.TraceParent, SpanIndex, trace.SpanKindConsumer, attrs...)
	}
}

// SpanScheduleFire names the span that starts the trace of a task a
// schedule fired.
const SpanScheduleFire = "ax.schedule.fire"

// traceFire starts the trace of a task schedule fires (each fire a trace
// of its own, like a submission without a caller's context) and returns
// the context to store with it; empty with tracing off. A fire another
// timer won leaves a span for a task that was not created.
func traceFire(schedule string, nt *store.NewTask) string {
	return tracing.Root(SpanScheduleFire, trace.SpanKindProducer,
		append(tracing.TaskAttrs(nt.ID, nt.Type), attribute.String("ax.schedule", schedule),
			attribute.String("ax.due", time.UnixMilli(nt.NextRunTimeMs).UTC().Format(time.RFC3339Nano)))...)
}
