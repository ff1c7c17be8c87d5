package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/events"
)

// historyCursor names task_history's row in event_relay.
const historyCursor = "task_history"

// Defaults for HistoryGaps.
const (
	GapGraceDefault   = 250 * time.Millisecond
	LateWindowDefault = 10 * time.Minute
	// recheckEvery is how often watched holes are read again: a row in one
	// is late already, and the read costs a range per hole, while a relay
	// makes hundreds of passes a second.
	recheckEvery = 100 * time.Millisecond
)

// HistoryGaps is what one relay remembers between passes about holes in
// task_history's IDs.
//
// Why holes matter: the relay walks task_history by ID with a cursor, and
// AUTO_INCREMENT hands out IDs before their rows commit, so a hole below a
// committed row is a transaction still open (its rows appear within
// milliseconds), an ID allocated but not written yet, or a transaction that
// rolled back (a hole forever). They look alike, so a hole holds the rows
// behind it back for Grace (the relay looks again every 10 ms meanwhile),
// after which it is taken to be a rollback and passed. Passed holes are
// rechecked on every pass for LateWindow: a row that shows up in one after
// all (a transaction that stayed open longer than Grace) is published
// then, out of order, rather than never.
//
// Why nothing is lost: every row up to the cursor has been published,
// except rows in the watched holes, and both change only after a publish
// was acknowledged (a hole is forgotten once its late row is published).
// The cursor and the watched holes are stored together, in one statement,
// at every lease renewal and release, and a relay taking the lease over
// starts from both; rows past the stored cursor it reads again. So a row
// is lost only if its transaction commits more than LateWindow after its
// hole was passed.
//
// With Settle set, holes are not tracked at all (see settled).
type HistoryGaps struct {
	// Grace is how long a hole holds back the rows behind it.
	Grace time.Duration
	// LateWindow is how long a passed hole is still watched.
	LateWindow time.Duration
	// Settle, when positive, turns gap tracking off: a row is published
	// once the relay has seen a row at or past its ID at least Settle ago,
	// and holes below are taken as final. Safe while every transaction
	// that writes history commits within Settle of taking its IDs.
	Settle time.Duration
	// marks: the highest ID seen by each pass that saw a higher one, with
	// when (Settle only).
	marks []idMark

	// pending: hole start ID -> when this relay first saw it.
	pending map[int64]time.Time
	// passed: holes given up on, watched until their deadline.
	passed []passedGap
	// nextRecheck is when the watched holes are read again.
	nextRecheck time.Time
	// step is the server's auto_increment_increment (1 unless a
	// multi-primary setup spaces IDs out), read on the first pass.
	step int64
	now  func() time.Time
	// buf is the row buffer a pass reads into, reused by the next: a
	// relay makes hundreds of passes a second, and the rows of one are
	// done with when it ends. merged is where a pass puts them together
	// with the rows it held (ahead).
	buf, merged []historyEvent
	// ahead holds the rows the last pass read past a hole still in its
	// grace, and aheadOf the cursor they lie past: the next pass from that
	// cursor reads only the holes among them and what lies past the last
	// (readPast) instead of all of them again. A history row never
	// changes once committed, so a row read once is the row; only the
	// holes can still fill. A hole lives as long as the transaction that
	// took its IDs, and the relay looks every 10 ms and after every commit
	// meanwhile: read again each time, the rows behind a hole were read
	// 1.5 times each under the chains workload.
	ahead   []historyEvent
	aheadOf int64
}

// maxAheadHoles bounds the holes readPast reads among the rows held:
// past it, a pass reads everything past the cursor again.
const maxAheadHoles = 32

// idRange is a run of history IDs, both ends included.
type idRange struct{ from, to int64 }

type passedGap struct {
	idRange
	until time.Time
}

// NewHistoryGaps returns a gap memory with the defaults filled in.
func NewHistoryGaps(grace, lateWindow time.Duration) *HistoryGaps {
	if grace <= 0 {
		grace = GapGraceDefault
	}
	if lateWindow <= 0 {
		lateWindow = LateWindowDefault
	}
	return &HistoryGaps{Grace: grace, LateWindow: lateWindow, pending: map[int64]time.Time{}, now: time.Now}
}

// Watched reports how many passed holes are still being rechecked.
func (g *HistoryGaps) Watched() int { return len(g.passed) }

// historyEvent is one history row as the relay reads it.
type historyEvent struct {
	id       int64
	taskType string
	event    events.TaskTransferred
	rejected bool
	trace    sql.NullString
}

// RelayResult is what one history pass did.
type RelayResult struct {
	// Relayed counts events handed to publish.
	Relayed int
	// Next is the cursor after the pass: every row up to it is published
	// (or passed over).
	Next int64
	// Held is true when a hole younger than the grace holds rows back: the
	// caller should look again shortly rather than wait to be woken.
	Held bool
	// Full is true when the pass read as many rows as it may: more wait.
	Full bool
}

// RelayHistory publishes the events of task_history rows past cursor, in
// ID order, and returns the cursor past them. It writes nothing: the relay
// holding the lease keeps the cursor in memory and stores it when it
// renews the lease (RenewRelayLease), so a pass costs one read. A relay
// that dies before storing it leaves its successor to publish some events
// again, which JetStream drops by Nats-Msg-Id. See HistoryGaps for how
// holes in the IDs are handled. What gaps remembers changes only once
// publish returned nil: a pass whose publish fails leaves every row it
// read, late ones included, to the next pass.
func (s *Store) RelayHistory(ctx context.Context, cursor int64, limit int, gaps *HistoryGaps, publish func(context.Context, []OutboxRow) error) (RelayResult, error) {
	if gaps.step == 0 {
		if err := s.db.QueryRowContext(ctx, `SELECT @@auto_increment_increment`).Scan(&gaps.step); err != nil {
			return RelayResult{}, fmt.Errorf("read auto_increment_increment: %w", err)
		}
		gaps.step = max(gaps.step, 1)
	}
	rows, full, err := gaps.readPast(ctx, s.db, cursor, limit)
	if err != nil {
		return RelayResult{}, err
	}
	p, err := s.planPass(ctx, cursor, limit, rows, gaps)
	if err != nil {
		return RelayResult{}, err
	}
	all := p.take
	if len(p.late) > 0 {
		all = append(p.late, p.take...)
	}
	batch := make([]OutboxRow, 0, len(all))
	for _, h := range all {
		if h.taskType == "" {
			continue // written before migration 0007: relayed through the outbox
		}
		row, err := h.outboxRow()
		if err != nil {
			return RelayResult{}, err
		}
		batch = append(batch, row)
	}
	if len(batch) > 0 {
		if err := publish(ctx, batch); err != nil {
			return RelayResult{}, fmt.Errorf("publish %d history events: %w", len(batch), err)
		}
	}
	gaps.commit(p)
	return RelayResult{Relayed: len(batch), Next: p.next, Held: p.held, Full: full}, nil
}

// readPast returns the rows past cursor in ID order, at most limit, and
// whether there may be more. Rows held from the last pass (ahead, when
// it ended at cursor) are not read again: one statement reads the holes
// below and among them and the rows past the last, and the two are
// merged. The rows returned live until the next pass.
func (g *HistoryGaps) readPast(ctx context.Context, q querier, cursor int64, limit int) (rows []historyEvent, full bool, err error) {
	ahead := g.ahead
	g.ahead = g.ahead[:0] // kept again only by a pass that publishes (commit)
	held := len(ahead) > 0 && g.aheadOf == cursor && g.Settle <= 0
	var holes []idRange
	if held {
		holes = aheadHoles(cursor, ahead, max(g.step, 1))
	}
	if !held || len(holes) > maxAheadHoles {
		rows, err = readHistory(ctx, q, g.buf[:0], `WHERE id > ? ORDER BY id LIMIT ?`, cursor, limit)
		if err != nil {
			return nil, false, err
		}
		g.buf = rows[:0]
		return rows, len(rows) >= limit, nil
	}
	// Padded to a power of two with repeats of the last hole, so that the
	// statement comes in six texts, each kept prepared (preparingConnector).
	for n := len(holes); n&(n-1) != 0; n++ {
		holes = append(holes, holes[len(holes)-1])
	}
	where, args := inRanges(holes)
	args = append(args, ahead[len(ahead)-1].id, limit)
	read, err := readHistory(ctx, q, g.buf[:0], "WHERE "+where+"id > ? ORDER BY id LIMIT ?", args...)
	if err != nil {
		return nil, false, err
	}
	g.buf = read[:0]
	// A read that stopped at limit rows may have left rows unread below
	// held ones past its last; the first limit rows merged are all at or
	// below that last, so cutting the merge at limit drops those.
	rows = mergeByID(g.merged[:0], ahead, read)
	g.merged = rows[:0]
	full = len(read) >= limit
	if len(rows) > limit {
		rows, full = rows[:limit], true
	}
	return rows, full, nil
}

// aheadHoles returns the holes in the IDs below and among rows (held
// rows, ordered by ID, all past cursor).
func aheadHoles(cursor int64, rows []historyEvent, step int64) []idRange {
	var out []idRange
	prev := cursor
	for _, h := range rows {
		if h.id > prev+step {
			out = append(out, idRange{prev + step, h.id - step})
		}
		prev = h.id
	}
	return out
}

// mergeByID appends to out the rows of a and b, each ordered by ID and
// with no ID in both, in ID order.
func mergeByID(out, a, b []historyEvent) []historyEvent {
	for len(a) > 0 && len(b) > 0 {
		if a[0].id < b[0].id {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	out = append(out, a...)
	return append(out, b...)
}

// planPass decides what a pass over rows publishes: late rows from the
// watched holes (a relay without gap tracking still watches those it took
// over from one with it), then the rows past cursor that may go out.
func (s *Store) planPass(ctx context.Context, cursor int64, limit int, rows []historyEvent, gaps *HistoryGaps) (p gapPlan, err error) {
	if p.late, p.rest, err = gaps.recheck(ctx, s.db); err != nil {
		return p, err
	}
	if gaps.Settle <= 0 {
		p.take, p.next, p.held, p.passed = gaps.advance(cursor, rows)
		if p.held {
			p.behind = rows[len(p.take):]
		}
		return p, nil
	}
	var newest int64
	if len(rows) >= limit {
		if err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM task_history`).Scan(&newest); err != nil {
			return p, fmt.Errorf("read newest history ID: %w", err)
		}
	}
	p.take, p.next, p.held = gaps.settled(cursor, rows, newest)
	return p, nil
}

// The history relay's lease. One relay at a time walks task_history: the
// one whose name is in event_relay.holder with lease_until ahead on the
// MySQL clock. The lease is a value, never a held lock (a relay stopped
// mid-pass, by a paused VM or SIGSTOP, keeps its connection and any lock
// for as long as MySQL takes to notice, which can be hours): a stopped
// holder stops events only until its lease lapses. Every statement is
// fenced by holder, so a relay that lost the lease can neither renew it
// nor move the cursor. The holder's cursor only grows from the one it
// took over, so it is written as is, with its watched holes. lease_seq
// changes on every take and renewal so a matched row always counts as
// affected.

// RelayCursor reads the stored history cursor.
func (s *Store) RelayCursor(ctx context.Context) (int64, error) {
	cursor, _, err := s.relayPosition(ctx)
	return cursor, err
}

// relayPosition reads the stored history cursor and the holes below it
// still watched (HistoryGaps.watchedText).
func (s *Store) relayPosition(ctx context.Context) (cursor int64, watched string, err error) {
	var w sql.NullString
	err = s.db.QueryRowContext(ctx, `SELECT last_id, watched FROM event_relay WHERE name = ?`, historyCursor).Scan(&cursor, &w)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, "", fmt.Errorf("event_relay has no %q row: run `ax migrate up`", historyCursor)
	}
	if err != nil {
		return 0, "", fmt.Errorf("read relay cursor: %w", err)
	}
	return cursor, w.String, nil
}

// TakeRelayLease takes the lease for holder for ttl if it is free, lapsed
// or already holder's, and returns the stored cursor, with gaps set to
// watch the holes stored with it; ok is false while another relay holds
// it, and gaps is unchanged.
func (s *Store) TakeRelayLease(ctx context.Context, holder string, ttl time.Duration, gaps *HistoryGaps) (cursor int64, ok bool, err error) {
	res, err := s.db.ExecContext(ctx, `UPDATE event_relay
		SET holder = ?, lease_until = NOW(3) + INTERVAL ? MICROSECOND, lease_seq = lease_seq + 1
		WHERE name = ? AND (holder = ? OR holder = '' OR lease_until IS NULL OR lease_until < NOW(3))`,
		holder, ttl.Microseconds(), historyCursor, holder)
	if err != nil {
		return 0, false, fmt.Errorf("take relay lease: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, false, fmt.Errorf("take relay lease: %w", err)
	}
	// Read even when the lease is someone else's: a missing cursor row also
	// matches nothing, and must be an error, not a silent standby forever.
	// Read after the take: only the holder writes the position, so this
	// one is the last holder's and stays this relay's until it writes.
	cursor, watched, err := s.relayPosition(ctx)
	if err != nil || n == 0 {
		return 0, false, err
	}
	if err := gaps.restore(watched); err != nil {
		return 0, false, err
	}
	return cursor, true, nil
}

// RenewRelayLease extends holder's lease by ttl and stores its cursor with
// the holes gaps still watches below it (one statement: the pair is always
// one holder's at one moment); ok is false when the lease is another
// relay's now, and nothing was written.
func (s *Store) RenewRelayLease(ctx context.Context, holder string, ttl time.Duration, cursor int64, gaps *HistoryGaps) (ok bool, err error) {
	res, err := s.db.ExecContext(ctx, `UPDATE event_relay
		SET last_id = ?, watched = ?, lease_until = NOW(3) + INTERVAL ? MICROSECOND, lease_seq = lease_seq + 1
		WHERE name = ? AND holder = ?`, cursor, gaps.watchedText(), ttl.Microseconds(), historyCursor, holder)
	if err != nil {
		return false, fmt.Errorf("renew relay lease: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("renew relay lease: %w", err)
	}
	return n == 1, nil
}

// ReleaseRelayLease stores holder's cursor and watched holes and frees the
// lease at once, so another relay need not wait for it to lapse.
func (s *Store) ReleaseRelayLease(ctx context.Context, holder string, cursor int64, gaps *HistoryGaps) error {
	_, err := s.db.ExecContext(ctx, `UPDATE event_relay
		SET last_id = ?, watched = ?, holder = '', lease_until = NULL, lease_seq = lease_seq + 1
		WHERE name = ? AND holder = ?`, cursor, gaps.watchedText(), historyCursor, holder)
	if err != nil {
		return fmt.Errorf("release relay lease: %w", err)
	}
	return nil
}

// gapPlan is what one pass found: the rows to publish and how the holes
// change once they are published.
type gapPlan struct {
	// late are rows that turned up in watched holes; take are the rows
	// past the cursor that may go out now, up to next.
	late, take []historyEvent
	next       int64
	held       bool
	// behind are the rows past next held back by a hole in its grace.
	behind []historyEvent
	// rest is the watched holes without the late rows; passed the holes
	// this pass gives up on.
	rest, passed []passedGap
}

// advance walks rows (ordered by ID, all > cursor) and returns those that
// may be published now, the new cursor, whether a young hole holds the
// rest back, and the holes passed on the way. It only records when it
// first saw a hole: the rest changes in commit, after the publish.
func (g *HistoryGaps) advance(cursor int64, rows []historyEvent) (take []historyEvent, next int64, held bool, passed []passedGap) {
	now := g.now()
	step := max(g.step, 1)
	next = cursor
	for i, h := range rows {
		if h.id > next+step {
			from, to := next+step, h.id-step
			first, seen := g.pending[from]
			if !seen {
				g.pending[from] = now
				first = now
			}
			if now.Sub(first) < g.Grace {
				g.notice(rows[i:], now)
				return rows[:i], next, true, passed
			}
			passed = append(passed, passedGap{idRange{from, to}, now.Add(g.LateWindow)})
		}
		next = h.id
	}
	return rows, next, false, passed
}

// notice starts the grace of every hole between rows not yet seen, the
// rows behind a hole still in its grace: the holes of transactions that
// rolled back together then lapse together, rather than each starting its
// grace only once the cursor reaches it (N such holes in a row held the
// rows behind them N graces). Only when a hole began is recorded; it is
// passed, as ever, only once the cursor reaches it.
func (g *HistoryGaps) notice(rows []historyEvent, now time.Time) {
	step := max(g.step, 1)
	for i := 1; i < len(rows); i++ {
		if from := rows[i-1].id + step; rows[i].id > from {
			if _, seen := g.pending[from]; !seen {
				g.pending[from] = now
			}
		}
	}
}

// commit applies a pass whose events were acknowledged: late rows leave
// their holes, passed holes are watched, and holes below the new cursor
// (passed, filled, or passed by another relay) are no longer pending.
func (g *HistoryGaps) commit(p gapPlan) {
	g.passed = append(p.rest, p.passed...)
	g.ahead, g.aheadOf = append(g.ahead[:0], p.behind...), p.next
	for from := range g.pending {
		if from <= p.next {
			delete(g.pending, from)
		}
	}
}

// recheck reads rows that turned up in watched holes, stops watching holes
// past their window, and returns the holes as they are once the rows found
// are published (each split around them).
func (g *HistoryGaps) recheck(ctx context.Context, q querier) (found []historyEvent, rest []passedGap, err error) {
	now := g.now()
	if len(g.passed) == 0 || now.Before(g.nextRecheck) {
		return nil, g.passed, nil
	}
	g.nextRecheck = now.Add(recheckEvery)
	kept := g.passed[:0]
	var ranges []idRange
	for _, p := range g.passed {
		if !now.After(p.until) {
			kept = append(kept, p)
			ranges = append(ranges, p.idRange)
		}
	}
	g.passed = kept
	if len(kept) == 0 {
		return nil, kept, nil
	}
	found, err = readRanges(ctx, q, ranges)
	if err != nil || len(found) == 0 {
		return nil, kept, err
	}
	for _, p := range kept {
		from := p.from
		for _, h := range found {
			if h.id < from || h.id > p.to {
				continue
			}
			if h.id > from {
				rest = append(rest, passedGap{idRange{from, h.id - 1}, p.until})
			}
			from = h.id + 1
		}
		if from <= p.to {
			rest = append(rest, passedGap{idRange{from, p.to}, p.until})
		}
	}
	return found, rest, nil
}

// watchedText encodes the watched holes for event_relay.watched:
// comma-separated from-to@until (IDs inclusive, until in Unix ms).
func (g *HistoryGaps) watchedText() string {
	var b strings.Builder
	for i, p := range g.passed {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d-%d@%d", p.from, p.to, p.until.UnixMilli())
	}
	return b.String()
}

// restore replaces what g remembers with the watched holes stored with the
// cursor a relay takes over from; holes past the cursor are found again.
func (g *HistoryGaps) restore(text string) error {
	var passed []passedGap
	for f := range strings.SplitSeq(text, ",") {
		if f == "" {
			continue
		}
		var from, to, until int64
		if _, err := fmt.Sscanf(f, "%d-%d@%d", &from, &to, &until); err != nil || from > to {
			return fmt.Errorf("event_relay.watched: bad hole %q (want from-to@until_unix_ms)", f)
		}
		passed = append(passed, passedGap{idRange{from, to}, time.UnixMilli(until)})
	}
	g.passed, g.nextRecheck = passed, time.Time{}
	g.ahead = g.ahead[:0]
	clear(g.pending)
	return nil
}

// querier is a pool or a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// readRanges reads the history rows in ranges.
func readRanges(ctx context.Context, q querier, ranges []idRange) ([]historyEvent, error) {
	where, args := inRanges(ranges)
	return readHistory(ctx, q, nil, "WHERE "+strings.TrimSuffix(where, " OR ")+" ORDER BY id", args...)
}

// inRanges is the condition that an ID lies in one of ranges, each
// followed by " OR ", with its arguments.
func inRanges(ranges []idRange) (string, []any) {
	var where strings.Builder
	args := make([]any, 0, 2*len(ranges)+2)
	for _, r := range ranges {
		where.WriteString("id BETWEEN ? AND ? OR ")
		args = append(args, r.from, r.to)
	}
	return where.String(), args
}

// readHistory appends the history rows the query tail selects to out.
func readHistory(ctx context.Context, q querier, out []historyEvent, tail string, args ...any) ([]historyEvent, error) {
	rows, err := q.QueryContext(ctx, `SELECT id, task_id, from_status, to_status, attempt, reason, actor, event_id,
		created_at, task_type, priority, next_run_time, rejected, route, trace_parent FROM task_history `+tail, args...)
	if err != nil {
		return nil, fmt.Errorf("read history to relay: %w", err)
	}
	defer rows.Close()
	var from, to sql.RawBytes
	var prio, route int
	for rows.Next() {
		// Scanned in place: a row variable would escape to the heap (its
		// fields' addresses go to Scan) and be copied in again.
		out = append(out, historyEvent{})
		h := &out[len(out)-1]
		if err := rows.Scan(&h.id, &h.event.TaskID, &from, &to, &h.event.Attempt, &h.event.Reason, &h.event.Actor,
			&h.event.EventID, &h.event.At, &h.taskType, &prio, &h.event.NextRunTimeMs, &h.rejected, &route, &h.trace); err != nil {
			return nil, fmt.Errorf("scan history to relay: %w", err)
		}
		h.event.From, h.event.To = statusOf(from), statusOf(to)
		h.event.Type = h.taskType
		h.event.Priority = contracts.PriorityFromRank(prio)
		h.event.Route = routeOf(route)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read history to relay: %w", err)
	}
	return out, nil
}

func (h historyEvent) outboxRow() (OutboxRow, error) {
	payload, err := events.Encode(h.event)
	if err != nil {
		return OutboxRow{}, fmt.Errorf("encode event of task %d: %w", h.event.TaskID, err)
	}
	subject := events.TransferSubject(h.event.To, h.event.Route)
	if h.rejected {
		subject = events.SubjectTaskRejected
	}
	row := OutboxRow{ID: h.id, EventID: h.event.EventID, Subject: subject, EventType: events.TypeTaskTransferred,
		CorrelationID: strconv.FormatInt(h.event.TaskID, 10), Payload: payload, WrittenAt: h.event.At,
		TraceParent: h.trace.String}
	if !h.rejected && h.event.To == contracts.StatusReady && h.event.Route == events.RouteDispatch {
		row.DueNow = &events.TaskRef{TaskID: h.event.TaskID, Type: h.event.Type, To: h.event.To, Attempt: h.event.Attempt,
			Priority: h.event.Priority, NextRunTimeMs: h.event.NextRunTimeMs, Route: h.event.Route}
	}
	return row, nil
}

// CountUnpublished counts events not yet published: history rows past the
// relay cursor and outbox rows. It takes a plain connection because the
// bench harness has no Store.
func CountUnpublished(ctx context.Context, db *sql.DB) (int64, error) {
	var n int64
	err := db.QueryRowContext(ctx, `SELECT
		(SELECT COUNT(*) FROM task_history WHERE task_type <> '' AND id > (SELECT last_id FROM event_relay WHERE name = ?))
		+ (SELECT COUNT(*) FROM outbox)`, historyCursor).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count unpublished events: %w", err)
	}
	return n, nil
}

// readyRoute keeps a route only on READY events and on RETRYING ones
// whose backoff had elapsed by their commit (ReadyWhenDue: not the
// timer's); every other state is the timer's (RETRYING) or nobody's.
func readyRoute(to contracts.Status, r events.Route) events.Route {
	if to != contracts.StatusReady && to != contracts.StatusRetrying {
		return events.RouteTimer
	}
	return r
}

// routeCode and routeOf map events.Route to task_history.route.
func routeCode(r events.Route) int {
	switch r {
	case events.RouteDispatch:
		return 1
	case events.RouteDispatched:
		return 2
	default:
		return 0
	}
}

func routeOf(code int) events.Route {
	switch code {
	case 1:
		return events.RouteDispatch
	case 2:
		return events.RouteDispatched
	default:
		return events.RouteTimer
	}
}

// statusOf returns the status named by b without allocating for the known
// ones (every history row names two).
func statusOf(b []byte) contracts.Status {
	for _, st := range contracts.Statuses {
		if string(b) == string(st) {
			return st
		}
	}
	return contracts.Status(b)
}
