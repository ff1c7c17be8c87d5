package testenv

import (
	"sync/atomic"
	"time"
)

// Clock is the local clock plus however far a test skipped it ahead: time
// passes as usual, and Skip moves it on at once, so a test that waits for
// something to expire (a cache entry, a grace period) takes no time.
type Clock struct {
	skipped atomic.Int64 // nanoseconds
}

// Now returns the local time plus everything skipped so far.
func (c *Clock) Now() time.Time { return time.Now().Add(time.Duration(c.skipped.Load())) }

// Skip moves the clock d ahead.
func (c *Clock) Skip(d time.Duration) { c.skipped.Add(int64(d)) }
