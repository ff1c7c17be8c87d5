package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Children hands out the children of a CounterVec by their label values,
// remembered in a map of its own. WithLabelValues hashes the values and
// takes the vector's lock on every call, and the counters of every task
// (submitted, created, dispatched) would make that call per task; a read
// lock and one map lookup cost a fraction of it. A vector whose children
// are deleted must not be used through Children (none of ax's counters
// is).
type Children[K comparable] struct {
	vec    *prometheus.CounterVec
	labels func(K) []string

	mu   sync.RWMutex
	kids map[K]prometheus.Counter
}

// NewChildren caches vec's children; labels turns a key into the label
// values, in the vector's order.
func NewChildren[K comparable](vec *prometheus.CounterVec, labels func(K) []string) *Children[K] {
	return &Children[K]{vec: vec, labels: labels, kids: map[K]prometheus.Counter{}}
}

// With returns the child counter of k.
func (c *Children[K]) With(k K) prometheus.Counter {
	c.mu.RLock()
	kid, ok := c.kids[k]
	c.mu.RUnlock()
	if ok {
		return kid
	}
	kid = c.vec.WithLabelValues(c.labels(k)...)
	c.mu.Lock()
	c.kids[k] = kid
	c.mu.Unlock()
	return kid
}

// Per-task counters, read through Children.
var (
	// SubmittedBy is TasksSubmitted by type and de-duplication.
	SubmittedBy = NewChildren(TasksSubmitted, func(k SubmitKey) []string {
		dedup := "false"
		if k.Deduplicated {
			dedup = "true"
		}
		return []string{k.Type, dedup}
	})
	// TransfersTo is Transfers by target state.
	TransfersTo = NewChildren(Transfers, func(to string) []string { return []string{to} })
	// DispatchedOf is Dispatched by type.
	DispatchedOf = NewChildren(Dispatched, func(typ string) []string { return []string{typ} })
	// DispatchedLeanOf is DispatchedLean by type.
	DispatchedLeanOf = NewChildren(DispatchedLean, func(typ string) []string { return []string{typ} })
)

// SubmitKey holds TasksSubmitted's label values.
type SubmitKey struct {
	Type         string
	Deduplicated bool
}
