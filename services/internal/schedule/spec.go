// Package schedule turns a schedule's cron expression and time zone into
// fire times, and decides which fire times a timer fires after it was
// away (the catch-up policy). It is pure logic: the timer fires, the store
// enforces one task per fire time.
//
// Expressions are parsed by github.com/robfig/cron/v3 (5 fields, or 6 with
// a leading seconds field, plus the @hourly-style descriptors and "@every
// <duration>"). Its Next walks real time in the schedule's zone, which is
// right for schedules whose hour field is a wildcard but, at a change of
// daylight saving time, passes over a fixed-hour fire time that falls into
// the skipped hour and fires one that falls into the repeated hour twice.
// Spec.Next corrects both for fixed-hour schedules (see docs/scheduling.md):
//
//   - a fire time in the skipped hour (02:30 on the spring change in
//     Europe/Berlin) fires once, at the first instant after the gap (03:00
//     CEST);
//   - a fire time in the repeated hour (02:30 on the autumn change) fires
//     once, at its first occurrence (02:30 CEST), not again at 02:30 CET.
//
// Schedules whose hour field is a wildcard ("*/10 * * * *") follow real
// time: the skipped hour has no fire times and the repeated hour has its
// own, so they fire every ten real minutes through both changes.
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"
	// Time zones come with the binary, so a host without a zoneinfo
	// database resolves "Europe/Berlin" like any other.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
)

// parser accepts 5 fields, an optional leading seconds field, and the
// descriptors (@daily, @every 10s, ...).
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// fieldNames name the six fields of the parser's full form, seconds first.
var fieldNames = []string{"second", "minute", "hour", "day of month", "month", "day of week"}

// MinInterval is the shortest interval between fire times; cron's
// granularity is a second, and @every is held to it too.
const MinInterval = time.Second

// FieldError says which part of a schedule is unusable: "cron", "time_zone",
// or a cron field ("cron.minute"), so an API answer can point at it.
type FieldError struct {
	Field  string
	Detail string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Detail }

// ErrNeverFires is wrapped by the FieldError of an expression with no fire
// time in the next five years, such as "0 0 30 2 *" (30 February).
var ErrNeverFires = errors.New("the schedule never fires")

// Spec is a parsed schedule: an expression in a time zone.
type Spec struct {
	expr string
	zone *time.Location
	// spec is the parsed expression, or nil for "@every".
	spec  *cron.SpecSchedule
	every time.Duration
	// wallClock is set when the hour field is not a wildcard: such
	// schedules name hours of the wall clock, and the DST rules apply.
	wallClock bool
}

// Parse checks expr and zone ("" is UTC) and that the schedule fires at
// least once in the five years after now. Errors are *FieldError.
func Parse(expr, zone string, now time.Time) (*Spec, error) {
	loc, err := loadZone(zone)
	if err != nil {
		return nil, err
	}
	expr = strings.TrimSpace(expr)
	s := &Spec{expr: expr, zone: loc}
	switch {
	case expr == "":
		return nil, &FieldError{Field: "cron", Detail: "a cron expression is required, e.g. \"*/5 * * * *\""}
	case strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ="):
		return nil, &FieldError{Field: "cron", Detail: "give the time zone in time_zone, not in the expression"}
	case strings.HasPrefix(expr, "@every"):
		if err := s.parseEvery(); err != nil {
			return nil, err
		}
		return s, nil
	case strings.HasPrefix(expr, "@"):
		sched, err := parser.Parse(expr)
		if err != nil {
			return nil, &FieldError{Field: "cron", Detail: fmt.Sprintf("%q: %v", expr, err)}
		}
		s.spec = sched.(*cron.SpecSchedule)
	default:
		if err := s.parseFields(); err != nil {
			return nil, err
		}
	}
	s.spec.Location = loc
	s.wallClock = s.spec.Hour&(1<<63) == 0 // robfig's star bit
	if s.Next(now).IsZero() {
		return nil, &FieldError{Field: "cron", Detail: fmt.Sprintf("%q has no fire time in the next five years (a date such as 30 February?): %v", expr, ErrNeverFires)}
	}
	return s, nil
}

func loadZone(zone string) (*time.Location, error) {
	if zone == "" {
		return time.UTC, nil
	}
	if zone == "Local" {
		// The server's zone would make a schedule mean something else on
		// every host.
		return nil, &FieldError{Field: "time_zone", Detail: "\"Local\" depends on the server: name an IANA zone such as \"Europe/Berlin\", or \"UTC\""}
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		return nil, &FieldError{Field: "time_zone", Detail: fmt.Sprintf("unknown time zone %q: name an IANA zone such as \"Europe/Berlin\", or \"UTC\"", zone)}
	}
	return loc, nil
}

// parseEvery reads "@every <duration>": whole seconds, at least one.
func (s *Spec) parseEvery() error {
	raw := strings.TrimSpace(strings.TrimPrefix(s.expr, "@every"))
	d, err := time.ParseDuration(raw)
	switch {
	case err != nil:
		return &FieldError{Field: "cron", Detail: fmt.Sprintf("@every %q is not a duration like \"30s\" or \"5m\"", raw)}
	case d < MinInterval:
		return &FieldError{Field: "cron", Detail: fmt.Sprintf("@every %s is below the shortest interval of %s", d, MinInterval)}
	case d%time.Second != 0:
		return &FieldError{Field: "cron", Detail: fmt.Sprintf("@every %s is not a whole number of seconds", d)}
	}
	s.every = d
	return nil
}

// parseFields parses a 5- or 6-field expression, and when that fails finds
// the field at fault by parsing each alone among wildcards: the parser's
// own errors do not say which field they mean.
func (s *Spec) parseFields() error {
	fields := strings.Fields(s.expr)
	if len(fields) != 5 && len(fields) != 6 {
		return &FieldError{Field: "cron", Detail: fmt.Sprintf("%q has %d fields: want 5 (minute hour day-of-month month day-of-week) or 6 (a leading seconds field)", s.expr, len(fields))}
	}
	full := fields
	if len(fields) == 5 {
		full = append([]string{"0"}, fields...)
	}
	if sched, err := parser.Parse(strings.Join(full, " ")); err == nil {
		s.spec = sched.(*cron.SpecSchedule)
		return nil
	}
	for i, f := range full {
		probe := []string{"0", "*", "*", "*", "*", "*"}
		probe[i] = f
		if _, err := parser.Parse(strings.Join(probe, " ")); err != nil {
			pos := i + len(fields) - 6 + 1 // 1-based, as the user wrote it
			return &FieldError{Field: "cron." + strings.ReplaceAll(fieldNames[i], " ", "_"),
				Detail: fmt.Sprintf("field %d (%s) %q of %q: %v", pos, fieldNames[i], f, s.expr, err)}
		}
	}
	_, err := parser.Parse(strings.Join(full, " "))
	return &FieldError{Field: "cron", Detail: fmt.Sprintf("%q: %v", s.expr, err)}
}

// Zone is the schedule's time zone.
func (s *Spec) Zone() *time.Location { return s.zone }

// Next returns the first fire time strictly after after, or the zero time
// if there is none within five years. Fire times are whole seconds.
func (s *Spec) Next(after time.Time) time.Time {
	after = after.In(s.zone)
	if s.every > 0 {
		return after.Truncate(time.Second).Add(s.every)
	}
	t := after
	// Each round passes over one repeated wall time; a handful suffice.
	for range 8 {
		c := s.spec.Next(t)
		if c.IsZero() || !s.wallClock {
			return c
		}
		if g, ok := s.gapFire(t, c); ok {
			return g
		}
		if !repeated(c) {
			return c
		}
		t = c
	}
	return time.Time{}
}

// gapFire looks for a spring-forward gap between after and c whose skipped
// wall times the expression matches; such a fire time fires at the end of
// the gap, the first instant after the change.
func (s *Spec) gapFire(after, c time.Time) (time.Time, bool) {
	wall := *s.spec
	wall.Location = time.UTC // the wall clock, without its offsets
	x := after
	for range 16 {
		_, end := x.ZoneBounds()
		if end.IsZero() || end.After(c) {
			return time.Time{}, false
		}
		_, before := end.Add(-time.Nanosecond).Zone()
		_, afterOff := end.Zone()
		if afterOff > before {
			skipped := time.Duration(afterOff-before) * time.Second
			w := end.In(time.FixedZone("", before))
			from := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, time.UTC)
			if m := wall.Next(from.Add(-time.Second)); !m.IsZero() && m.Before(from.Add(skipped)) {
				return end.In(s.zone), true
			}
		}
		x = end
	}
	return time.Time{}, false
}

// repeated reports whether t is the second occurrence of its wall time:
// it falls within the first stretch after the clocks were set back.
func repeated(t time.Time) bool {
	start, _ := t.ZoneBounds()
	if start.IsZero() {
		return false
	}
	_, prev := start.Add(-time.Nanosecond).Zone()
	_, cur := t.Zone()
	return prev > cur && t.Sub(start) < time.Duration(prev-cur)*time.Second
}
