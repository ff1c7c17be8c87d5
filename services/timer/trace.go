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
