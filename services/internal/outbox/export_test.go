package outbox

import (
	"github.com/axsched/ax/services/internal/bus"
	"github.com/axsched/ax/services/internal/store"
)

// InjectPublishFaults makes fault fail r's publishes: called before each
// publish with acked false and after JetStream acknowledged it with acked
// true; a non-nil error fails the publish there.
func InjectPublishFaults(r *Relay, fault func(acked bool) error) { r.fault = fault }

// EventMessages is the messages a relay publishes for rows' events,
// perMessage transfers at most in one, on a first attempt.
func EventMessages(rows []store.OutboxRow, perMessage int) []bus.Msg {
	return appendEvents(nil, rows, perMessage, maxMessageBytes, nil)
}
