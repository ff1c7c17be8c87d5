package store

import (
	"context"
	"fmt"
	"time"
)

// Bulk operations first count what a filter matches, then act on the IDs
// it matches, a bounded page at a time; both read the same index range as
// the list of that filter.

// MatchCount is how many rows a filter matched, up to a bound, and the
// largest ID among them: acting later on IDs up to it leaves out rows that
// appeared since the count.
type MatchCount struct {
	Count int64
	MaxID int64
}

// CountTasks counts the tasks f matches, reading at most bound+1 index
// entries: a Count above bound means "more than bound".
func (s *Store) CountTasks(ctx context.Context, f TaskFilter, bound int) (MatchCount, error) {
	q, args := listTasksSQL("id", ListTasksParams{Filter: f, Limit: bound + 1})
	return s.countMatches(ctx, q, args, "tasks")
}

// TaskIDs returns the IDs of a page of the tasks p matches, in list order.
func (s *Store) TaskIDs(ctx context.Context, p ListTasksParams) ([]int64, error) {
	q, args := listTasksSQL("id", p)
	return s.ids(ctx, q, args, "tasks")
}

// DeadLetterFilter selects open (not yet re-run) dead letters for bulk
// re-runs; zero fields do not filter.
type DeadLetterFilter struct {
	Type string
	// CreatedAfter and CreatedBefore bound when the letter was filed.
	CreatedAfter, CreatedBefore time.Time
	// MaxID keeps only letters with an ID at most this.
	MaxID int64
}

// openDeadLettersSQL reads idx_dead_letters_open (retried_at, id): the open
// letters, newest first.
func openDeadLettersSQL(f DeadLetterFilter, limit int) (string, []any) {
	q := `SELECT id FROM dead_letters FORCE INDEX (idx_dead_letters_open) WHERE retried_at IS NULL`
	var args []any
	if f.Type != "" {
		q += " AND task_type = ?"
		args = append(args, f.Type)
	}
	if !f.CreatedAfter.IsZero() {
		q += " AND created_at >= ?"
		args = append(args, f.CreatedAfter.UTC())
	}
	if !f.CreatedBefore.IsZero() {
		q += " AND created_at < ?"
		args = append(args, f.CreatedBefore.UTC())
	}
	if f.MaxID > 0 {
		q += " AND id <= ?"
		args = append(args, f.MaxID)
	}
	return q + " ORDER BY id DESC LIMIT ?", append(args, limit)
}

// CountOpenDeadLetters counts the open letters f matches, up to bound+1.
func (s *Store) CountOpenDeadLetters(ctx context.Context, f DeadLetterFilter, bound int) (MatchCount, error) {
	q, args := openDeadLettersSQL(f, bound+1)
	return s.countMatches(ctx, q, args, "dead letters")
}

// OpenDeadLetterIDs returns the IDs of up to limit open letters f matches,
// newest first.
func (s *Store) OpenDeadLetterIDs(ctx context.Context, f DeadLetterFilter, limit int) ([]int64, error) {
	q, args := openDeadLettersSQL(f, limit)
	return s.ids(ctx, q, args, "dead letters")
}

func (s *Store) countMatches(ctx context.Context, q string, args []any, what string) (MatchCount, error) {
	var c MatchCount
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*), COALESCE(MAX(id), 0) FROM (`+q+`) matched`, args...).Scan(&c.Count, &c.MaxID)
	if err != nil {
		return MatchCount{}, fmt.Errorf("count matching %s: %w", what, err)
	}
	return c, nil
}

func (s *Store) ids(ctx context.Context, q string, args []any, what string) ([]int64, error) {
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("select matching %s: %w", what, err)
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("select matching %s: %w", what, err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("select matching %s: %w", what, err)
	}
	return out, nil
}
