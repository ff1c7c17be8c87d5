package contracts

import (
	"fmt"
	"net/http"
)

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

// Error codes of the HTTP edge, answered before a request reaches a handler.
const (
	// CodeMethodNotAllowed (405): the path exists but not with this method;
	// the Allow header lists the methods it has.
	CodeMethodNotAllowed = "method_not_allowed"
	// CodeUnsupportedMediaType (415): a POST, PUT, PATCH or DELETE without
	// Content-Type: application/json.
	CodeUnsupportedMediaType = "unsupported_media_type"
	// CodeRateLimited (429): the caller's token bucket is empty; Retry-After
	// says in how many seconds the next request is accepted.
	CodeRateLimited = "rate_limited"
	// CodeMisdirectedRequest (421): the Host header names a host this
	// server is not configured to answer for (a DNS rebinding defence).
	CodeMisdirectedRequest = "misdirected_request"
	// CodeOriginNotAllowed (403): a CORS preflight from an origin outside
	// the allow-list.
	CodeOriginNotAllowed = "origin_not_allowed"
)

// Problem is an API error body.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
	Code   string `json:"code"`
}

// NewProblem builds the body of an answer with status and code: Type is
// "urn:ax:error:" + code and Title the status's reason phrase.
func NewProblem(status int, code, detail string) *Problem {
	return &Problem{Type: "urn:ax:error:" + code, Title: http.StatusText(status), Status: status,
		Detail: detail, Code: code}
}

// Error makes a Problem usable as a Go error on the client side.
func (p *Problem) Error() string {
	return fmt.Sprintf("%d %s: %s", p.Status, p.Code, p.Detail)
}
