package chaos

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// verdict is what the checker found for one scenario.
type verdict struct {
	scenario     string
	acked        int
	refused      int
	lost         int // missing, or not SUCCESS at the end
	early        int // calls that began before the due time
	dupExplained int // extra calls, each for an attempt the history granted after a recovery
	dupUnexpl    int // calls for an attempt already called, or never granted
	recoveries   int // RUNNING→READY and TIMEOUT transfers
	worst        time.Duration
	worstTask    string
	delays       []time.Duration // due → start of the successful call, per task
	examples     []string
	// loadMin and loadMax bound the machine's one-minute load average
	// during the scenario.
	loadMin, loadMax float64
}

func (v *verdict) note(format string, args ...any) {
	if len(v.examples) < 10 {
		v.examples = append(v.examples, fmt.Sprintf(format, args...))
	}
}

// row is a history row of a task.
type row struct {
	from, to string
	attempt  int
	actor    string
	reason   string
	next     int64 // the task's due time after the transfer, unix ms
}

// waitSettled waits until no task in the scenario's database is waiting or
// running, or until timeout.
func waitSettled(ctx context.Context, t *testing.T, db *sql.DB, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var open int
		err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM tasks WHERE status NOT IN ('SUCCESS','CANCELLED')
			AND NOT (status IN ('FAILED','TIMEOUT') AND retry_count >= max_retry_count)`).Scan(&open)
		if err == nil && open == 0 {
			return
		}
		time.Sleep(time.Second)
	}
}

// check judges every acknowledged task against the history and the calls.
func check(ctx context.Context, t *testing.T, db *sql.DB, tasks []acked, calls map[string][]call) verdict {
	t.Helper()
	v := verdict{acked: len(tasks)}
	status := map[string]string{}
	history := map[string][]row{}
	rows, err := db.QueryContext(ctx, `SELECT CAST(id AS CHAR), status FROM tasks`)
	if err != nil {
		t.Fatalf("read tasks: %v", err)
	}
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			t.Fatal(err)
		}
		status[id] = st
	}
	rows.Close()
	rows, err = db.QueryContext(ctx, `SELECT CAST(task_id AS CHAR), from_status, to_status, attempt, actor, reason,
		next_run_time FROM task_history ORDER BY id`)
	if err != nil {
		t.Fatalf("read history: %v", err)
	}
	for rows.Next() {
		var id string
		var r row
		if err := rows.Scan(&id, &r.from, &r.to, &r.attempt, &r.actor, &r.reason, &r.next); err != nil {
			t.Fatal(err)
		}
		history[id] = append(history[id], r)
	}
	rows.Close()

	for _, a := range tasks {
		a.due = dueOf(a, history[a.id], calls)
		judge(&v, a, status[a.id], history[a.id], calls[a.id])
	}
	return v
}

// dueOf is when a task may first start. A submission's answer says it; a
// workflow's first step was answered without one, and its creation's
// history row says it; a second step is due when its parent's successful
// call answered (the earliest such answer, should a recovery have called
// it twice), or never, for the checker, when no such answer is on the
// record: then its parent is judged lost and it is judged on its own
// history only.
func dueOf(a acked, hist []row, calls map[string][]call) time.Time {
	switch {
	case a.after != "":
		var due time.Time
		for _, c := range calls[a.after] {
			if c.ok && !c.end.IsZero() && (due.IsZero() || c.end.Before(due)) {
				due = c.end
			}
		}
		return due
	case a.due.IsZero() && len(hist) > 0:
		return time.UnixMilli(hist[0].next)
	}
	return a.due
}

func judge(v *verdict, a acked, status string, hist []row, calls []call) {
	if status != "SUCCESS" {
		v.lost++
		v.note("task %s: status %q at the end (%d calls, history %s)", a.id, status, len(calls), describe(hist))
		return
	}
	granted := map[int]bool{}
	// due is when each attempt may start: the task's due time, or the end
	// of the backoff a failure of the attempt before set.
	due := map[int]time.Time{}
	recovered := 0
	// shared counts, per attempt, the runs besides the one its claim
	// granted that the history records: a fused run (begun before its
	// claim was written) whose claim was refused, or whose lease a later
	// claim of the same attempt took over from a dead or frozen holder.
	shared := map[int]int{}
	for _, r := range hist {
		if r.from == "READY" && r.to == "RUNNING" {
			granted[r.attempt] = true
			if strings.Contains(r.reason, "took over lease") {
				shared[r.attempt]++
				recovered++
			}
		}
		var refused int
		if _, err := fmt.Sscanf(r.reason, "rejected READY->RUNNING from attempt %d", &refused); err == nil {
			shared[refused+1]++
			recovered++
		}
		if r.to == "RETRYING" && r.next > 0 {
			due[r.attempt+1] = time.UnixMilli(r.next)
		}
		if (r.from == "RUNNING" && r.to == "READY") || r.to == "TIMEOUT" {
			recovered++
		}
		// A failure the load did not plan is a recovery too (a run cut
		// short by a fault and recorded as FAILED).
		if r.to == "FAILED" && r.attempt > a.w.Fail {
			recovered++
		}
	}
	dueOf := func(attempt int) time.Time {
		if d, ok := due[attempt]; ok && d.After(a.due) {
			return d
		}
		return a.due
	}
	v.recoveries += recovered
	seen := map[int]int{}
	var success *call
	for i, c := range calls {
		if d := dueOf(c.attempt); c.start.Before(d) {
			v.early++
			v.note("task %s: attempt %d called %s before its due time", a.id, c.attempt, d.Sub(c.start))
		}
		if seen[c.attempt] > shared[c.attempt] || !granted[c.attempt] {
			v.dupUnexpl++
			v.note("task %s: call for attempt %d unexplained (calls before: %d, granted: %t; history %s)",
				a.id, c.attempt, seen[c.attempt], granted[c.attempt], describe(hist))
		}
		seen[c.attempt]++
		if c.ok {
			success = &calls[i]
		}
	}
	if extra := len(calls) - 1 - a.w.Fail; extra > 0 {
		if recovered >= extra {
			v.dupExplained += extra
		} else {
			v.dupUnexpl += extra - recovered
			v.dupExplained += recovered
			v.note("task %s: %d extra calls, %d recoveries recorded", a.id, extra, recovered)
		}
	}
	if success == nil {
		v.lost++
		v.note("task %s: SUCCESS in MySQL but no successful call on record", a.id)
		return
	}
	if a.due.IsZero() {
		return // no due time on record (dueOf): no delay to count from
	}
	// The delay counts from the end of the last planned failure's backoff:
	// the backoffs the load asked for are no recovery, every wait a fault
	// caused is.
	d := success.start.Sub(dueOf(a.w.Fail + 1))
	v.delays = append(v.delays, d)
	if d > v.worst {
		v.worst = d
		v.worstTask = fmt.Sprintf("task %s (%d calls): %s", a.id, len(calls), describe(hist))
	}
}

// p returns the q-quantile of the start delays.
func (v *verdict) p(q float64) time.Duration {
	if len(v.delays) == 0 {
		return 0
	}
	d := slices.Clone(v.delays)
	slices.Sort(d)
	return d[int(q*float64(len(d)-1))]
}

func describe(hist []row) string {
	var b strings.Builder
	for _, r := range hist {
		fmt.Fprintf(&b, "[%s→%s #%d %s: %.60s] ", r.from, r.to, r.attempt, r.actor, r.reason)
	}
	return b.String()
}
