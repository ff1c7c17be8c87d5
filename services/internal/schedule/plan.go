package schedule

import (
	"fmt"
	"time"
)

// CatchUp says what a timer does with fire times it missed (it, and every
// other timer, was away when they came).
type CatchUp string

// The catch-up policies.
const (
	// CatchUpSkip fires none of the missed fire times.
	CatchUpSkip CatchUp = "skip"
	// CatchUpLast fires the latest of them, once.
	CatchUpLast CatchUp = "last"
	// CatchUpAll fires each of them, up to the schedule's limit (the
	// latest ones).
	CatchUpAll CatchUp = "all"
)

// Overlap says whether a fire waits for the previous one's task.
type Overlap string

// The overlap policies.
const (
	// OverlapAllow fires whatever the previous fire's task is doing.
	OverlapAllow Overlap = "allow"
	// OverlapSkip passes over a fire time while the previous fire's task
	// is not final (READY, RUNNING, RETRYING, SUSPEND).
	OverlapSkip Overlap = "skip"
)

// Limits of CatchUpAll.
const (
	CatchUpLimitDefault = 100
	CatchUpLimitMax     = 1000
)

// ParseCatchUp accepts skip, last or all; "" is skip.
func ParseCatchUp(v string) (CatchUp, error) {
	switch CatchUp(v) {
	case "":
		return CatchUpSkip, nil
	case CatchUpSkip, CatchUpLast, CatchUpAll:
		return CatchUp(v), nil
	}
	return "", &FieldError{Field: "catch_up", Detail: fmt.Sprintf("catch_up %q: want skip, last or all", v)}
}

// ParseOverlap accepts allow or skip; "" is allow.
func ParseOverlap(v string) (Overlap, error) {
	switch Overlap(v) {
	case "":
		return OverlapAllow, nil
	case OverlapAllow, OverlapSkip:
		return Overlap(v), nil
	}
	return "", &FieldError{Field: "overlap", Detail: fmt.Sprintf("overlap %q: want allow or skip", v)}
}

// ValidateCatchUpLimit checks a catch-up limit; 0 means the default.
func ValidateCatchUpLimit(n int) (int, error) {
	switch {
	case n == 0:
		return CatchUpLimitDefault, nil
	case n < 0 || n > CatchUpLimitMax:
		return 0, &FieldError{Field: "catch_up_limit", Detail: fmt.Sprintf("catch_up_limit %d: want 1 to %d", n, CatchUpLimitMax)}
	}
	return n, nil
}

// Plan is what a timer does with a schedule whose next fire time has come.
type Plan struct {
	// Fire are the fire times to fire, oldest first.
	Fire []time.Time
	// Missed counts the due fire times passed over by the catch-up policy.
	Missed int
	// Next is the first fire time after now: the schedule's next fire
	// time once the pass is done.
	Next time.Time
}

// scanLimit bounds how many due fire times Plan walks from the stored next
// fire time; past it, only the last day's fire times are considered (a
// schedule that fires every second and was away for three hours).
const scanLimit = 10_000

// Plan lists the fire times from next up to now and applies policy. A fire
// time more than grace before now was missed; the others are simply due and
// fire under every policy (a timer that wakes a few milliseconds late has
// missed nothing).
func (s *Spec) Plan(next, now time.Time, policy CatchUp, limit int, grace time.Duration) Plan {
	var (
		due    []time.Time
		jumped int
	)
	t := next
	for !t.IsZero() && !t.After(now) {
		if len(due) == scanLimit && jumped == 0 {
			// Long away: jump to the last day rather than walk every
			// fire time since.
			jumped = len(due)
			due = due[:0]
			if t = s.Next(now.Add(-24 * time.Hour)); t.IsZero() || t.After(now) {
				break
			}
		}
		due = append(due, t)
		t = s.Next(t)
	}
	p := Plan{Next: t, Missed: jumped}
	missedBefore := now.Add(-grace)
	switch policy {
	case CatchUpAll:
		if limit > 0 && len(due) > limit {
			p.Missed += len(due) - limit
			due = due[len(due)-limit:]
		}
		p.Fire = due
	case CatchUpLast:
		if len(due) > 0 {
			p.Missed += len(due) - 1
			p.Fire = due[len(due)-1:]
		}
	default:
		for _, d := range due {
			if d.Before(missedBefore) {
				p.Missed++
			} else {
				p.Fire = append(p.Fire, d)
			}
		}
	}
	return p
}
