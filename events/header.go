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
)
