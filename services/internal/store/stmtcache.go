package store

import (
	"container/list"
	"context"
	"database/sql/driver"
	"errors"
	"hash/maphash"
	"sync/atomic"
	"time"
)

// Statements with values reach MySQL in one of two ways. Interpolated (the
// driver writes the values into the text; one round trip) is the pool's
// default; but for a statement that carries many values — a batch's
// INSERT of hundreds of history rows, an UPDATE with a CASE per row, a
// long IN list — MariaDB then spends much of its time lexing them: a
// history row inserted from text cost it ~15 µs of CPU against ~10.6 µs as
// a prepared statement's binary parameters (1,000-row INSERTs on this
// machine), and binary results spare the client parsing text as well.
//
// preparingConnector keeps, per connection, prepared statements for the
// texts that connection runs again: a text is sent interpolated the first
// time, prepared the second (one extra round trip) and executed from then
// on (one round trip, as before). Each connection keeps its most recently
// used perConn statements; the connections of one pool share a budget of
// budget statements, so a process never holds more of the server's
// prepared statements (max_prepared_stmt_count bounds them for the whole
// server, 16,382 by default) than its budget. A text that finds no room
// goes interpolated. Texts must repeat for any of this to pay, so the hot
// statements send their IN lists and multi-row INSERTs in a few sizes
// (sizeClass). Only the database/sql/driver interfaces are used, so the
// driver is not bent; budget 0 turns it off.
type preparingConnector struct {
	inner   driver.Connector
	perConn int
	budget  int64
	held    atomic.Int64 // statements prepared on the pool's connections
}

// newPreparingConnector wraps inner; budget <= 0 leaves inner as it is.
func newPreparingConnector(inner driver.Connector, budget int) driver.Connector {
	if budget <= 0 {
		return inner
	}
	return &preparingConnector{inner: inner, perConn: min(budget, perConnStatements), budget: int64(budget)}
}

// perConnStatements bounds one connection's statements: the hot statements
// of one writer in all their sizes.
const perConnStatements = 160

// Connect wraps the driver's connection.
func (c *preparingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	_, execer := conn.(driver.ExecerContext)
	_, queryer := conn.(driver.QueryerContext)
	_, preparer := conn.(driver.ConnPrepareContext)
	if !execer || !queryer || !preparer { // not the driver this is written for
		return conn, nil
	}
	return &preparingConn{Conn: conn, pool: c, byText: map[string]*list.Element{}, lru: list.New(),
		seen: map[uint64]struct{}{}}, nil
}

// Driver is the driver's.
func (c *preparingConnector) Driver() driver.Driver { return c.inner.Driver() }

// preparingConn is one connection with its prepared statements. database/sql
// uses a connection from one goroutine at a time, so it needs no lock.
type preparingConn struct {
	driver.Conn
	pool   *preparingConnector
	byText map[string]*list.Element // of *cachedStmt
	lru    *list.List               // front: most recently used
	// seen holds the hashes of texts run once and not prepared: one-off
	// texts cost no prepare. Cleared when it grows past seenMax.
	seen map[uint64]struct{}
	// pausedUntil: after a refused prepare (a server at its
	// max_prepared_stmt_count refuses every one) the connection prepares
	// nothing for prepareBackoff, rather than pay a failing round trip
	// on every statement.
	pausedUntil time.Time
}

const prepareBackoff = time.Minute

type cachedStmt struct {
	text string
	stmt driver.Stmt
}

const seenMax = 4096

var seenSeed = maphash.MakeSeed()

// prepared returns the connection's prepared statement for query, preparing
// it when query runs for the second time, or nil: the caller then sends
// query interpolated, which also reports any error the text itself has.
func (c *preparingConn) prepared(ctx context.Context, query string, args int) driver.Stmt {
	if args == 0 {
		return nil
	}
	if e, ok := c.byText[query]; ok {
		c.lru.MoveToFront(e)
		return e.Value.(*cachedStmt).stmt
	}
	if !c.pausedUntil.IsZero() && time.Now().Before(c.pausedUntil) {
		return nil
	}
	h := maphash.String(seenSeed, query)
	if _, again := c.seen[h]; !again {
		if len(c.seen) >= seenMax {
			clear(c.seen)
		}
		c.seen[h] = struct{}{}
		return nil
	}
	if c.lru.Len() >= c.pool.perConn || c.pool.held.Load() >= c.pool.budget {
		if c.lru.Len() == 0 {
			return nil // the pool's budget is held by other connections
		}
		c.evict() // room from this connection's own
	}
	c.pool.held.Add(1)
	st, err := c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
	if err != nil || st.NumInput() != args {
		if err == nil {
			_ = st.Close()
		} else {
			c.pausedUntil = time.Now().Add(prepareBackoff)
		}
		c.pool.held.Add(-1)
		return nil
	}
	delete(c.seen, h)
	c.byText[query] = c.lru.PushFront(&cachedStmt{text: query, stmt: st})
	return st
}

// evict closes the least recently used statement.
func (c *preparingConn) evict() {
	old := c.lru.Remove(c.lru.Back()).(*cachedStmt)
	delete(c.byText, old.text)
	_ = old.stmt.Close()
	c.pool.held.Add(-1)
}

// ExecContext executes query's prepared statement, or passes it on.
func (c *preparingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	if st, ok := c.prepared(ctx, query, len(args)).(driver.StmtExecContext); ok {
		return st.ExecContext(ctx, args)
	}
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

// QueryContext runs query's prepared statement, or passes it on.
func (c *preparingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	if st, ok := c.prepared(ctx, query, len(args)).(driver.StmtQueryContext); ok {
		return st.QueryContext(ctx, args)
	}
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

// PrepareContext is the driver's: an explicitly prepared statement is its
// caller's to close, not the cache's.
func (c *preparingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

// BeginTx is the driver's.
func (c *preparingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if b, ok := c.Conn.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	return nil, errors.New("mysql connection cannot begin with options")
}

// Ping is the driver's.
func (c *preparingConn) Ping(ctx context.Context) error {
	if p, ok := c.Conn.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

// CheckNamedValue is the driver's: values are converted as it would.
func (c *preparingConn) CheckNamedValue(nv *driver.NamedValue) error {
	if ch, ok := c.Conn.(driver.NamedValueChecker); ok {
		return ch.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

// ResetSession is the driver's; prepared statements outlive it.
func (c *preparingConn) ResetSession(ctx context.Context) error {
	if r, ok := c.Conn.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

// IsValid is the driver's.
func (c *preparingConn) IsValid() bool {
	if v, ok := c.Conn.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// Close gives the connection's statements back to the budget: the server
// frees them with the connection.
func (c *preparingConn) Close() error {
	if c.lru != nil {
		c.pool.held.Add(-int64(c.lru.Len()))
		c.byText, c.lru = nil, nil
	}
	return c.Conn.Close()
}

// sizeClasses are the lengths the hot statements send their IN lists and
// multi-row INSERTs in, so that their texts repeat (preparingConnector):
// every length up to 8, then steps of at most half the length before.
var sizeClasses = [...]int{1, 2, 3, 4, 5, 6, 7, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512}

// classUp is the smallest size class of at least n (n itself past the
// largest): the length an IN list of n values is padded to.
func classUp(n int) int {
	for _, c := range sizeClasses {
		if c >= n {
			return c
		}
	}
	return n
}

// classDown is the largest size class of at most n (n >= 1): the rows one
// INSERT of a longer batch carries.
func classDown(n int) int {
	best := 1
	for _, c := range sizeClasses {
		if c > n {
			break
		}
		best = c
	}
	return best
}

// inIDs returns the placeholders and values of an IN list of ids (not
// empty), padded to its size class by repeating the last id: IN is a set,
// so the repeats change no statement's meaning.
func inIDs(ids []int64) (string, []any) {
	n := classUp(len(ids))
	args := make([]any, n)
	for i := range args {
		args[i] = ids[min(i, len(ids)-1)]
	}
	return marks(n), args
}
