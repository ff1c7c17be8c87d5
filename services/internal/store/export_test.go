package store

import (
	"context"
	"database/sql"

	"github.com/go-sql-driver/mysql"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
)

// ChangeStatusForTest locks task id and writes its status change from ->
// to the way a transfer batch does, skipping the batch's own check of the
// row (what a planning bug would send), then — when sleep > 0 — runs a
// statement that takes that long, for a caller to give up during.
func (s *Store) ChangeStatusForTest(ctx context.Context, id int64, from, to contracts.Status, sleep float64) error {
	return s.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := lockRows(ctx, tx, []int64{id}, false); err != nil {
			return err
		}
		if err := updateRows(ctx, tx, []plannedStep{{p: TransferParams{TaskID: id, From: from, To: to}}}); err != nil {
			return err
		}
		if sleep <= 0 {
			return nil
		}
		_, err := tx.ExecContext(ctx, `DO SLEEP(?)`, sleep)
		return err
	})
}

// WrapTypeLoad puts wrap around c's reads of MySQL.
func (c *TypeCache) WrapTypeLoad(wrap func(load func(context.Context, string) (*TaskType, error), ctx context.Context, name string) (*TaskType, error)) {
	load := c.load
	c.load = func(ctx context.Context, name string) (*TaskType, error) { return wrap(load, ctx, name) }
}

// SuspendedSQL is what ReconcileSuspended asks for its window.
var SuspendedSQL = suspendedSQL

// SuspendedWindow is how many SUSPEND tasks a pass reads per task it may
// settle.
const SuspendedWindow = suspendedWindow

// StaleReadySQL is what StaleReady asks for a page of one state.
const StaleReadySQL = staleReadySQL

// EdgesAroundSQL, EdgesIntoSQL and StepEdgesSQL are lineage's reads of
// dependencies, HistoriesOfSQL of attempts.
var EdgesAroundSQL = edgesAroundSQL

// DivedRanges is the most ids lineage puts in one edgesAroundSQL.
const DivedRanges = divedRanges

const (
	HistoriesOfSQL = historiesOfSQL
	EdgesIntoSQL   = edgesIntoSQL
	StepEdgesSQL   = stepEdgesSQL
)

// OpenPreparingForTest opens a pool of one connection on dsn whose
// statements pass through preparingConnector with budget (<= 0: none),
// and a func that reports the statements the pool holds.
func OpenPreparingForTest(dsn string, budget int) (*sql.DB, func() int64, error) {
	cfg, err := ParseDSN(dsn)
	if err != nil {
		return nil, nil, err
	}
	inner, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, nil, err
	}
	c := newPreparingConnector(inner, budget)
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(1)
	held := func() int64 {
		if p, ok := c.(*preparingConnector); ok {
			return p.held.Load()
		}
		return 0
	}
	return db, held, nil
}

// Size classes, for tests.
var (
	ClassUp   = classUp
	ClassDown = classDown
	InIDs     = inIDs
)

// ReadPastForTest is a history pass's read (readPast) from cursor by a
// relay that held the rows held from the pass before (their reasons say
// "held"), returning the IDs read and the reasons they came with.
func ReadPastForTest(ctx context.Context, db *sql.DB, cursor int64, limit int, held []int64) (ids []int64, reasons []string, full bool, err error) {
	g := NewHistoryGaps(0, 0)
	g.step = 1
	for _, id := range held {
		g.ahead = append(g.ahead, historyEvent{id: id, event: events.TaskTransferred{Reason: "held"}})
	}
	g.aheadOf = cursor
	rows, full, err := g.readPast(ctx, db, cursor, limit)
	for _, r := range rows {
		ids = append(ids, r.id)
		reasons = append(reasons, r.event.Reason)
	}
	return ids, reasons, full, err
}
