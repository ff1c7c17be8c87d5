package events

// Headers set on every message ax publishes.
const (
	// HeaderMsgID is JetStream's de-duplication header; ax puts the event ID
	// in it so a retried publish is stored once.
	HeaderMsgID = "Nats-Msg-Id"
	// HeaderEventType names the payload type, e.g. "task.transferred.v1".
	HeaderEventType = "Ax-Event-Type"
	// HeaderCorrelationID ties every message about one task together; it is
	// the task ID. The name matches watermill's correlation metadata key so
	// watermill middleware sees it.
	HeaderCorrelationID = "correlation_id"
	// HeaderTraceParent carries the W3C trace context of the task a message
	// is about, when it has one: the span of the service that sent it, or
	// the task's stored context.
	HeaderTraceParent = "traceparent"
)
