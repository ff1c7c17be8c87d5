package contracts

import "fmt"

// ProblemContentType is the media type of every API error (RFC 9457).
const ProblemContentType = "application/problem+json"

// Error codes carried in Problem.Code. Clients branch on these, never on the
// human-readable detail.
const (
	CodeMalformedJSON     = "malformed_json"
	CodeInvalidArgument   = "invalid_argument"
	CodeUnknownType       = "unknown_type"
	CodePayloadTooLarge   = "payload_too_large"
	CodeNotFound          = "not_found"
	CodeIllegalTransition = "illegal_transition"
	CodeInternal          = "internal"
	CodeUnavailable       = "unavailable"
	// CodeUnauthenticated (401): no bearer token, or one that is unknown,
	// revoked or expired.
	CodeUnauthenticated = "unauthenticated"
	// CodeForbidden (403): the key's role does not allow the operation.
	CodeForbidden = "forbidden"
	// CodeConflict (409): the thing to create exists already, or the
	// change was made before (an API key name, a revoked key).
	CodeConflict = "conflict"
)

// Problem is an API error body.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
}

// Error makes a Problem usable as a Go error on the client side.
func (p *Problem) Error() string {
	return fmt.Sprintf("%d %s: %s", p.Status, p.Code, p.Detail)
}
