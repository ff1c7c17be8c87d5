package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/axsched/ax/contracts"
)

// Middleware wraps a Handler with one cross-cutting concern (logging, panic
// recovery, metrics), so business handlers contain business code only.
type Middleware func(Handler) Handler

// TypeOption sets one of the defaults a task type is declared with; see
// WithTimeout, WithMaxRetries and WithConcurrency.
type TypeOption func(*TypeSpec)

// WithTimeout sets how long one run of the type may take. Zero or less keeps
// TimeoutDefault. It only applies when the type is first registered: a type
// already stored keeps its stored timeout.
func WithTimeout(d time.Duration) TypeOption {
	return func(s *TypeSpec) { s.Timeout = d }
}

// WithMaxRetries sets how many times a failed task of the type is retried.
// Zero or less keeps MaxRetriesDefault, so it cannot switch retries off; a
// handler that knows retrying is pointless returns a Permanent error instead.
// Like WithTimeout, it only applies when the type is first registered.
func WithMaxRetries(n int) TypeOption {
	return func(s *TypeSpec) { s.MaxRetries = n }
}

// WithConcurrency bounds how many tasks of the type this executor runs at
// once, so one slow type cannot take every worker. Zero or less keeps
// ConcurrencyDefault.
func WithConcurrency(n int) TypeOption {
	return func(s *TypeSpec) { s.Concurrency = n }
}

// ErrUnknownType is wrapped in the error Dispatch returns for a task whose
// type has no registered handler.
var ErrUnknownType = errors.New("no handler registered for task type")

// Mux collects the handlers of an executor by task type, with the middleware
// every one of them runs under. Business code registers its handlers on a
// Mux and hands Specs to the executor; Dispatch routes a single task by its
// type.
//
// Registration mistakes (an invalid or duplicate type name, a nil handler)
// panic, as with net/http's ServeMux: they are programming errors found the
// first time the process starts, not conditions to handle at run time.
//
// The zero Mux is ready to use; a Mux is safe for concurrent use.
type Mux struct {
	mu          sync.RWMutex
	middlewares []Middleware
	entries     map[string]*muxEntry
}

type muxEntry struct {
	spec TypeSpec // spec.Handler is the handler as registered
	// wrapped is spec.Handler inside the current middleware chain; it is
	// rebuilt on Use so Specs and Dispatch never build chains per task.
	wrapped Handler
}

// NewMux returns an empty Mux.
func NewMux() *Mux {
	return &Mux{entries: map[string]*muxEntry{}}
}

// Use appends middleware that wraps every handler of the mux, including
// handlers registered before the call. The first middleware added is the
// outermost: with Use(a, b), a task passes through a, then b, then the
// handler.
func (m *Mux) Use(mw ...Middleware) {
	for i, w := range mw {
		if w == nil {
			panic(fmt.Sprintf("executor: Use: middleware %d is nil", i))
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.middlewares = append(m.middlewares, mw...)
	for _, e := range m.entries {
		e.wrapped = m.wrap(e.spec.Name, e.spec.Handler)
	}
}

// Handle registers h for taskType. It panics if taskType is not a valid type
// name (contracts.ValidateTypeName), if h is nil, or if taskType is already
// registered.
func (m *Mux) Handle(taskType string, h Handler, opts ...TypeOption) {
	if err := contracts.ValidateTypeName(taskType); err != nil {
		panic(fmt.Sprintf("executor: Handle: %v", err))
	}
	if h == nil {
		panic(fmt.Sprintf("executor: Handle: nil handler for task type %q", taskType))
	}
	spec := TypeSpec{Name: taskType, Handler: h}
	for _, o := range opts {
		o(&spec)
	}
	// Options set defaults only; the name and handler stay as given.
	spec.Name, spec.Handler = taskType, h

	m.mu.Lock()
	defer m.mu.Unlock()
	if _, dup := m.entries[taskType]; dup {
		panic(fmt.Sprintf("executor: Handle: task type %q registered twice", taskType))
	}
	if m.entries == nil {
		m.entries = map[string]*muxEntry{}
	}
	m.entries[taskType] = &muxEntry{spec: spec, wrapped: m.wrap(taskType, h)}
}

// HandleFunc registers fn for taskType; it panics like Handle.
func (m *Mux) HandleFunc(taskType string, fn func(ctx context.Context, t *Task) error, opts ...TypeOption) {
	if fn == nil {
		panic(fmt.Sprintf("executor: HandleFunc: nil function for task type %q", taskType))
	}
	m.Handle(taskType, HandlerFunc(fn), opts...)
}

// Specs returns one TypeSpec per registered type, sorted by name, with the
// middleware chain already applied to each handler: the form New takes.
func (m *Mux) Specs() []TypeSpec {
	m.mu.RLock()
	defer m.mu.RUnlock()
	specs := make([]TypeSpec, 0, len(m.entries))
	for _, e := range m.entries {
		s := e.spec
		s.Handler = e.wrapped
		specs = append(specs, s)
	}
	slices.SortFunc(specs, func(a, b TypeSpec) int { return strings.Compare(a.Name, b.Name) })
	return specs
}

// Dispatch runs the handler registered for t.Type, inside the middleware
// chain, which makes HandlerFunc(m.Dispatch) a Handler serving every
// registered type. (The Handler method name is taken by registration, as in
// net/http.) A task of an unregistered type fails with a Permanent error
// wrapping ErrUnknownType: retrying on this executor cannot help.
func (m *Mux) Dispatch(ctx context.Context, t *Task) error {
	// Read the handler under the lock, since Use rewraps it, but run it
	// without: a handler may take as long as its task's timeout.
	var h Handler
	m.mu.RLock()
	if e, ok := m.entries[t.Type]; ok {
		h = e.wrapped
	}
	m.mu.RUnlock()
	if h == nil {
		return Permanent(fmt.Errorf("%w %q (task %d)", ErrUnknownType, t.Type, t.ID))
	}
	return h.Handle(ctx, t)
}

// wrap applies the middleware chain to h, the first middleware outermost.
// The caller holds m.mu.
func (m *Mux) wrap(taskType string, h Handler) Handler {
	for i := len(m.middlewares) - 1; i >= 0; i-- {
		h = m.middlewares[i](h)
		if h == nil {
			panic(fmt.Sprintf("executor: middleware %d returned a nil handler for task type %q", i, taskType))
		}
	}
	return h
}
