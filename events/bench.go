package events

// BenchDone reports one run of an ax.bench handler to the `ax bench`
// harness, on SubjectBenchDone over core NATS, where a message holds a JSON
// array of them (executors before batching sent one object per message;
// the harness reads both). The handler takes its times
// itself, so the harness measures when work really started and ended rather
// than when MySQL or an event said so. Times are Unix nanoseconds of the
// executor's wall clock.
type BenchDone struct {
	TaskID  int64 `json:"task_id,string"`
	Attempt int   `json:"attempt"`
	// StartNs is taken on entry to the handler, EndNs just before it returns.
	StartNs int64 `json:"start_ns"`
	EndNs   int64 `json:"end_ns"`
	// OK is false for an attempt the payload told to fail.
	OK bool `json:"ok"`
	// The hops before the handler (Unix nanoseconds, zero when unknown;
	// see TaskDispatched): the READY transfer written, taken up by its
	// sender, the dispatch stored by JetStream, fetched by the executor,
	// the claim committed.
	CommittedNs int64 `json:"committed_ns,omitempty"`
	SentNs      int64 `json:"sent_ns,omitempty"`
	StoredNs    int64 `json:"stored_ns,omitempty"`
	FetchedNs   int64 `json:"fetched_ns,omitempty"`
	ClaimedNs   int64 `json:"claimed_ns,omitempty"`
}
