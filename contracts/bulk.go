package contracts

// Bulk operations act on every task (or dead letter) a filter matches, in
// two steps: a dry run counts the matches and returns a confirm token, and
// the same filter with that token acts, on at most BulkLimit items per call
// and never on items that appeared after the dry run.

// BulkLimit is the most items one bulk call acts on; a caller repeats the
// call with the same token until nothing remains.
const BulkLimit = 1000

// BulkCountMax is the most matches a dry run counts; a filter matching more
// must be narrowed (by creation time, say) before it can be confirmed.
const BulkCountMax = 100000

// BulkFilter selects the items of a bulk operation, with the meaning of the
// query parameters of GET /v1/tasks. Times are RFC 3339.
type BulkFilter struct {
	Type          string `json:"type,omitempty"`
	Status        string `json:"status,omitempty"`
	BizKey        string `json:"biz_key,omitempty"`
	Node          string `json:"node,omitempty"`
	CreatedAfter  string `json:"created_after,omitempty"`
	CreatedBefore string `json:"created_before,omitempty"`
}

// BulkRequest is the body of POST /v1/tasks:cancel and
// POST /v1/deadletters:retry: exactly one of DryRun and Confirm.
type BulkRequest struct {
	Filter BulkFilter `json:"filter"`
	// DryRun counts the matches and returns a confirm token; nothing changes.
	DryRun bool `json:"dry_run,omitempty"`
	// Confirm is the token of a dry run of the same filter: the call acts.
	Confirm string `json:"confirm,omitempty"`
	// Note is who asks, recorded beside the API key (the actor of record).
	Note string `json:"note,omitempty"`
}

// BulkResult answers a bulk request.
type BulkResult struct {
	DryRun bool `json:"dry_run"`
	// Matched is how many items match now (among those that existed at the
	// dry run, for a confirmed call).
	Matched int64 `json:"matched"`
	// Confirm, on a dry run, is the token that makes the same filter act.
	Confirm string `json:"confirm,omitempty"`
	// Done and Skipped count what this call acted on and what had moved
	// meanwhile and was left as it was.
	Done    int `json:"done"`
	Skipped int `json:"skipped"`
	// Remaining is what is left for further calls with the same token.
	Remaining int64 `json:"remaining"`
}
