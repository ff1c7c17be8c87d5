package contracts

// Caller is the answer of GET /v1/whoami: whether the server checks API
// keys and, when it does, the name and role of the key that made the
// request. A console uses it to say who its actions will be recorded as.
type Caller struct {
	// Auth is false when the server checks no keys (bound to loopback with
	// no key, or --auth off); Name and Role are then empty.
	Auth bool   `json:"auth"`
	Name string `json:"name,omitempty"`
	Role string `json:"role,omitempty"`
}
