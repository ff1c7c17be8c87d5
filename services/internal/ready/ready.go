// Package ready tells when a service is really serving: its consumers are
// declared and pulling, not merely started. /readyz and the process's
// start-up callback wait for it, so "ready" means "work sent now is taken".
package ready

import "sync"

// Gate opens once each of its parts has reported in.
type Gate struct {
	mu   sync.Mutex
	left int
	ch   chan struct{}
}

// New returns a gate that opens after parts calls of Done; with parts <= 0
// it is open at once.
func New(parts int) *Gate {
	g := &Gate{left: parts, ch: make(chan struct{})}
	if parts <= 0 {
		close(g.ch)
	}
	return g
}

// Done reports one part ready; calls beyond the parts count change nothing.
func (g *Gate) Done() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.left <= 0 {
		return
	}
	g.left--
	if g.left == 0 {
		close(g.ch)
	}
}

// Ready is closed once every part is ready.
func (g *Gate) Ready() <-chan struct{} { return g.ch }

// Open reports whether the gate is open, without waiting.
func (g *Gate) Open() bool {
	select {
	case <-g.ch:
		return true
	default:
		return false
	}
}
