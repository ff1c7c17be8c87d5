package schedule

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var ref = time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC)

func TestParseRefusesBadInput(t *testing.T) {
	cases := []struct {
		name, expr, zone, field, detail string
	}{
		{"empty", "", "", "cron", "required"},
		{"too few fields", "* * *", "", "cron", "has 3 fields"},
		{"too many fields", "* * * * * * *", "", "cron", "has 7 fields"},
		{"bad minute", "61 * * * *", "", "cron.minute", "field 1 (minute)"},
		{"bad day of week", "0 0 * * funday", "", "cron.day_of_week", "field 5 (day of week)"},
		{"bad second", "x 0 * * * *", "", "cron.second", "field 1 (second)"},
		{"bad hour with seconds", "0 0 25 * * *", "", "cron.hour", "field 3 (hour)"},
		{"30 February", "0 0 30 2 *", "", "cron", "never fires"},
		{"31 April", "0 0 31 4 *", "", "cron", "never fires"},
		{"every half second", "@every 500ms", "", "cron", "below the shortest interval"},
		{"every 1.5 seconds", "@every 1500ms", "", "cron", "whole number of seconds"},
		{"every nonsense", "@every soon", "", "cron", "not a duration"},
		{"unknown descriptor", "@fortnightly", "", "cron", "@fortnightly"},
		{"zone in expression", "CRON_TZ=Europe/Berlin 0 3 * * *", "", "cron", "time_zone"},
		{"unknown zone", "0 3 * * *", "Mars/Olympus", "time_zone", "unknown time zone"},
		{"server zone", "0 3 * * *", "Local", "time_zone", "depends on the server"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.expr, c.zone, ref)
			var fe *FieldError
			require.True(t, errors.As(err, &fe), "want a FieldError, got %v", err)
			require.Equal(t, c.field, fe.Field)
			require.Contains(t, fe.Error(), c.detail)
		})
	}
}

func TestNextFireTimes(t *testing.T) {
	cases := []struct {
		name, expr, zone string
		after            time.Time
		want             []string // RFC 3339 in UTC
	}{
		{"every second", "* * * * * *", "", ref, []string{"2026-01-10T12:00:01Z", "2026-01-10T12:00:02Z"}},
		{"five fields start at second 0", "*/15 * * * *", "", ref, []string{"2026-01-10T12:15:00Z", "2026-01-10T12:30:00Z"}},
		{"every 90 seconds", "@every 90s", "", ref.Add(300 * time.Millisecond), []string{"2026-01-10T12:01:30Z", "2026-01-10T12:03:00Z"}},
		{"daily in Berlin", "0 3 * * *", "Europe/Berlin", ref, []string{"2026-01-11T02:00:00Z", "2026-01-12T02:00:00Z"}},
		{"29 February", "0 0 29 2 *", "", ref, []string{"2028-02-29T00:00:00Z"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Parse(c.expr, c.zone, c.after)
			require.NoError(t, err)
			require.Equal(t, c.want, fireTimes(s, c.after, len(c.want)))
		})
	}
}

// TestDSTEuropeBerlin pins the daylight saving rules: in 2026 Berlin's
// clocks go from 02:00 CET to 03:00 CEST on 29 March and from 03:00 CEST
// back to 02:00 CET on 25 October.
func TestDSTEuropeBerlin(t *testing.T) {
	cases := []struct {
		name, expr string
		after      time.Time
		want       []string // RFC 3339 in UTC
	}{
		// 02:30 does not exist on 29 March: fired once, at 03:00 CEST
		// (01:00 UTC), not passed over.
		{"spring: skipped wall time fires after the gap", "30 2 * * *", date(2026, 3, 27),
			[]string{"2026-03-27T01:30:00Z", "2026-03-28T01:30:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		// Several skipped times collapse into the one instant after the gap.
		{"spring: a skipped hour fires once", "0,30 2 * * *", date(2026, 3, 29),
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z"}},
		{"spring: a time after the gap is not moved", "30 3 * * *", date(2026, 3, 28).Add(4 * time.Hour),
			[]string{"2026-03-29T01:30:00Z", "2026-03-30T01:30:00Z"}},
		// 02:30 happens twice on 25 October: fired at the first (CEST,
		// 00:30 UTC) only, not again at 02:30 CET (01:30 UTC).
		{"autumn: repeated wall time fires once", "30 2 * * *", date(2026, 10, 24),
			[]string{"2026-10-24T00:30:00Z", "2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		// Hour wildcards follow real time: every 30 real minutes through
		// both changes.
		{"autumn: wildcard hour fires in both passes", "0,30 * * * *", date(2026, 10, 25).Add(-time.Minute),
			[]string{"2026-10-24T22:00:00Z", "2026-10-24T22:30:00Z", "2026-10-24T23:00:00Z", "2026-10-24T23:30:00Z",
				"2026-10-25T00:00:00Z", "2026-10-25T00:30:00Z", "2026-10-25T01:00:00Z", "2026-10-25T01:30:00Z", "2026-10-25T02:00:00Z"}},
		{"spring: wildcard hour follows real time", "0 * * * *", date(2026, 3, 29),
			[]string{"2026-03-28T23:00:00Z", "2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z", "2026-03-29T02:00:00Z"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := Parse(c.expr, "Europe/Berlin", c.after)
			require.NoError(t, err)
			require.Equal(t, c.want, fireTimes(s, c.after.Add(-time.Second), len(c.want)))
		})
	}
}

// date is midnight of a day in Berlin.
func date(y int, m time.Month, d int) time.Time {
	loc, _ := time.LoadLocation("Europe/Berlin")
	return time.Date(y, m, d, 0, 0, 0, 0, loc)
}

func fireTimes(s *Spec, after time.Time, n int) []string {
	var out []string
	t := after
	for range n {
		t = s.Next(t)
		out = append(out, t.UTC().Format(time.RFC3339))
	}
	return out
}

func TestPlanCatchUp(t *testing.T) {
	s, err := Parse("* * * * * *", "", ref)
	require.NoError(t, err)
	next := ref.Add(time.Second) // the timers were away for ten seconds
	now := ref.Add(10*time.Second + 400*time.Millisecond)
	sec := func(n int) time.Time { return ref.Add(time.Duration(n) * time.Second) }
	cases := []struct {
		name   string
		policy CatchUp
		limit  int
		fire   []time.Time
		missed int
	}{
		{"skip keeps what is due within the grace", CatchUpSkip, 0, []time.Time{sec(9), sec(10)}, 8},
		{"last", CatchUpLast, 0, []time.Time{sec(10)}, 9},
		{"all", CatchUpAll, 100, []time.Time{sec(1), sec(2), sec(3), sec(4), sec(5), sec(6), sec(7), sec(8), sec(9), sec(10)}, 0},
		{"all capped keeps the latest", CatchUpAll, 3, []time.Time{sec(8), sec(9), sec(10)}, 7},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := s.Plan(next, now, c.policy, c.limit, 2*time.Second)
			require.Equal(t, c.fire, p.Fire)
			require.Equal(t, c.missed, p.Missed)
			require.Equal(t, sec(11), p.Next)
		})
	}
	t.Run("on time fires under every policy", func(t *testing.T) {
		for _, pol := range []CatchUp{CatchUpSkip, CatchUpLast, CatchUpAll} {
			p := s.Plan(sec(1), sec(1).Add(3*time.Millisecond), pol, 1, 2*time.Second)
			require.Equal(t, []time.Time{sec(1)}, p.Fire, pol)
		}
	})
	t.Run("not due yet", func(t *testing.T) {
		p := s.Plan(sec(2), sec(1), CatchUpAll, 1, time.Second)
		require.Empty(t, p.Fire)
		require.Equal(t, sec(2), p.Next)
	})
	t.Run("away for days jumps to the last day", func(t *testing.T) {
		p := s.Plan(next, ref.Add(72*time.Hour), CatchUpLast, 0, time.Second)
		require.Equal(t, []time.Time{ref.Add(72 * time.Hour)}, p.Fire)
		require.Equal(t, ref.Add(72*time.Hour+time.Second), p.Next)
	})
}
