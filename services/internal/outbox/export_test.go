package outbox

// InjectPublishFaults makes fault fail r's publishes: called before each
// publish with acked false and after JetStream acknowledged it with acked
// true; a non-nil error fails the publish there.
func InjectPublishFaults(r *Relay, fault func(acked bool) error) { r.fault = fault }
