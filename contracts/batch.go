package contracts

// BatchRequest is the body of POST /v1/tasks:batch: up to 1,000 submissions
// that bulk producers send in one round trip instead of one request each.
type BatchRequest struct {
	// Tasks are the submissions, each with the rules of POST /v1/tasks.
	Tasks []SubmitRequest `json:"tasks"`
}

// BatchItemResult says what became of one submission of a batch. Exactly one
// of Task and Error is set.
type BatchItemResult struct {
	// Index is the submission's position in BatchRequest.Tasks, from 0.
	Index int `json:"index"`
	// Status is the HTTP status POST /v1/tasks would have answered for this
	// submission alone: 201 created, 200 deduplicated, 400 or 413 rejected.
	Status int `json:"status"`
	// Task is the created task, or the existing one a deduplicated
	// submission matched. Its payload is left out so that the answer stays
	// small whatever the payloads; GET /v1/tasks/{id} returns it.
	Task *Task `json:"task,omitempty"`
	// Deduplicated is true when a task of the same type with the same
	// biz_key existed already, or was created by an earlier submission of
	// the same batch.
	Deduplicated bool `json:"deduplicated,omitempty"`
	// Error says why the submission was rejected; nothing was written for it.
	Error *Problem `json:"error,omitempty"`
}

// BatchResponse is the answer to POST /v1/tasks:batch: one result per
// submission, in request order, and how many ended each way.
type BatchResponse struct {
	Results      []BatchItemResult `json:"results"`
	Created      int               `json:"created"`
	Deduplicated int               `json:"deduplicated"`
	Rejected     int               `json:"rejected"`
}
