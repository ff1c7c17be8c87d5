package store

import (
	"sort"
	"time"
)

// SettleDefault is HistoryGaps.Settle of a relay with gap tracking off.
const SettleDefault = time.Second

// idMark says that the row id had committed at.
type idMark struct {
	at time.Time
	id int64
}

// settled is the relay without gap tracking: it returns the rows (ordered
// by ID, all > cursor) at or below the highest ID seen at least Settle
// ago, the cursor past them, and whether younger rows wait. Every ID up to
// that bound was taken at least Settle ago, so a transaction that holds
// one and commits within Settle has committed by now: a hole below the
// bound is a rollback, final, and the rows around it go out in ID order.
// Nothing here depends on the publish succeeding: the marks are only what
// was seen, true whatever happens next.
//
// newest is the highest committed ID the pass saw: the last of rows, or
// past them when the read was cut off by its limit (so a backlog goes out
// a batch per pass, not a batch per Settle).
func (g *HistoryGaps) settled(cursor int64, rows []historyEvent, newest int64) (take []historyEvent, next int64, held bool) {
	now := g.now()
	if n := len(rows); n > 0 {
		newest = max(newest, rows[n-1].id)
	}
	if newest > 0 && (len(g.marks) == 0 || newest > g.marks[len(g.marks)-1].id) {
		g.marks = append(g.marks, idMark{now, newest})
	}
	old := sort.Search(len(g.marks), func(i int) bool { return now.Sub(g.marks[i].at) < g.Settle })
	if old == 0 {
		return rows[:0], cursor, len(rows) > 0
	}
	bound := g.marks[old-1].id
	g.marks = g.marks[old-1:] // the older marks say less than this one
	n := sort.Search(len(rows), func(i int) bool { return rows[i].id > bound })
	next = cursor
	if n > 0 {
		next = rows[n-1].id
	}
	return rows[:n], next, n < len(rows)
}
