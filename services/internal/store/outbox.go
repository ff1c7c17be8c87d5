package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/axsched/ax/events"
)

// OutboxRow is an event waiting to be published.
type OutboxRow struct {
	ID            int64
	EventID       string
	Subject       string
	EventType     string
	CorrelationID string
	Payload       []byte
	// WrittenAt is when the row was written (its created_at, MySQL
	// clock): the relay's lag is measured from it.
	WrittenAt time.Time
	// DueNow is set on the READY event of a task that was due when it
	// became READY (events.RouteDispatch): the relay dispatches it with
	// its event.
	DueNow *events.TaskRef
	// TraceParent is the task's trace context, sent in the event's
	// traceparent header.
	TraceParent string
}

// RelayOutbox locks up to limit unpublished rows (FOR UPDATE SKIP LOCKED, so
// relay replicas share the work and never wait on each other), hands them to
// publish, and deletes them in the same transaction once publish returns
// nil. There is no "last relayed id" cursor: a row whose transaction commits
// late is simply found on a later pass, so no row is skipped. It returns how
// many rows were relayed.
func (s *Store) RelayOutbox(ctx context.Context, limit int, publish func(context.Context, []OutboxRow) error) (int, error) {
	var n int
	// READ COMMITTED: no gap locks, so the relay's locking scan and delete
	// never deadlock with producers inserting new rows.
	err := s.inTxOpts(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted}, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT id, event_id, subject, event_type, correlation_id, payload, created_at
			FROM outbox ORDER BY id LIMIT ? FOR UPDATE SKIP LOCKED`, limit)
		if err != nil {
			return fmt.Errorf("select outbox: %w", err)
		}
		var batch []OutboxRow
		for rows.Next() {
			var r OutboxRow
			if err := rows.Scan(&r.ID, &r.EventID, &r.Subject, &r.EventType, &r.CorrelationID, &r.Payload, &r.WrittenAt); err != nil {
				rows.Close()
				return fmt.Errorf("scan outbox: %w", err)
			}
			batch = append(batch, r)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("select outbox: %w", err)
		}
		if len(batch) == 0 {
			return nil
		}
		if err := publish(ctx, batch); err != nil {
			return fmt.Errorf("publish %d outbox events: %w", len(batch), err)
		}
		ids := make([]any, len(batch))
		for i, r := range batch {
			ids[i] = r.ID
		}
		q := "DELETE FROM outbox WHERE id IN (?" + strings.Repeat(",?", len(ids)-1) + ")"
		if _, err := tx.ExecContext(ctx, q, ids...); err != nil {
			return fmt.Errorf("delete relayed outbox rows: %w", err)
		}
		n = len(batch)
		return nil
	})
	return n, err
}
