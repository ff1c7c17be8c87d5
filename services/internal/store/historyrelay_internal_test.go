package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
)

func TestHistoryGapsAdvance(t *testing.T) {
	ev := func(ids ...int64) []historyEvent {
		out := make([]historyEvent, len(ids))
		for i, id := range ids {
			out[i] = historyEvent{id: id}
		}
		return out
	}
	idsOf := func(hs []historyEvent) []int64 {
		out := []int64{}
		for _, h := range hs {
			out = append(out, h.id)
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		step     int64
		cursor   int64
		rows     []historyEvent
		seenAgo  map[int64]time.Duration // holes first seen this long ago
		take     []int64
		next     int64
		held     bool
		passed   []idRange
		pendings []int64
	}{
		{name: "contiguous", cursor: 10, rows: ev(11, 12, 13), take: []int64{11, 12, 13}, next: 13},
		{name: "nothing new", cursor: 10, take: []int64{}, next: 10},
		{name: "young hole holds the rest", cursor: 10, rows: ev(11, 13, 14), take: []int64{11}, next: 11, held: true,
			pendings: []int64{12}},
		{name: "the holes behind a young hole start their grace", cursor: 10, rows: ev(11, 13, 15, 16, 18), take: []int64{11}, next: 11,
			held: true, pendings: []int64{12, 14, 17}},
		{name: "hole at the cursor holds everything", cursor: 10, rows: ev(12), take: []int64{}, next: 10, held: true,
			pendings: []int64{11}},
		{name: "old hole is passed and watched", cursor: 10, rows: ev(11, 15), seenAgo: map[int64]time.Duration{12: time.Second},
			take: []int64{11, 15}, next: 15, passed: []idRange{{12, 14}}},
		{name: "filled hole is forgotten", cursor: 10, rows: ev(11, 12), seenAgo: map[int64]time.Duration{12: 10 * time.Millisecond},
			take: []int64{11, 12}, next: 12},
		{name: "auto_increment_increment 2", step: 2, cursor: 11, rows: ev(13, 15, 19), take: []int64{13, 15}, next: 15,
			held: true, pendings: []int64{17}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1000, 0)
			g := NewHistoryGaps(100*time.Millisecond, time.Minute)
			g.now = func() time.Time { return now }
			g.step = tc.step
			for from, ago := range tc.seenAgo {
				g.pending[from] = now.Add(-ago)
			}
			take, next, held, passed := g.advance(tc.cursor, tc.rows)
			g.commit(gapPlan{next: next, rest: g.passed, passed: passed})
			require.Equal(t, tc.take, idsOf(take))
			require.Equal(t, tc.next, next)
			require.Equal(t, tc.held, held)
			var watched []idRange
			for _, p := range g.passed {
				require.Equal(t, now.Add(time.Minute), p.until)
				watched = append(watched, p.idRange)
			}
			require.Equal(t, tc.passed, watched)
			pend := []int64{}
			for from := range g.pending {
				pend = append(pend, from)
			}
			if tc.pendings == nil {
				tc.pendings = []int64{}
			}
			require.ElementsMatch(t, tc.pendings, pend)
		})
	}
}

// A hole stays young for Grace from when this relay first saw it, then is
// passed.
func TestHistoryGapsGraceRunsFromFirstSight(t *testing.T) {
	now := time.Unix(1000, 0)
	g := NewHistoryGaps(100*time.Millisecond, time.Minute)
	g.now = func() time.Time { return now }
	rows := []historyEvent{{id: 1}, {id: 3}}
	for _, step := range []time.Duration{0, 50 * time.Millisecond, 40 * time.Millisecond} {
		now = now.Add(step)
		take, next, held, passed := g.advance(0, rows)
		require.Empty(t, passed)
		require.True(t, held)
		require.Len(t, take, 1)
		require.EqualValues(t, 1, next)
	}
	now = now.Add(10 * time.Millisecond)
	take, next, held, passed := g.advance(0, rows)
	require.False(t, held)
	require.Len(t, take, 2)
	require.EqualValues(t, 3, next)
	require.Zero(t, g.Watched(), "watched only once the pass is published")
	g.commit(gapPlan{next: next, passed: passed})
	require.Equal(t, 1, g.Watched())
}

// Holes that appeared together (transactions rolled back together) lapse
// together: one grace holds the rows behind all of them, not one grace
// per hole as the cursor reaches each.
func TestHistoryGapsTogetherLapseTogether(t *testing.T) {
	now := time.Unix(1000, 0)
	g := NewHistoryGaps(100*time.Millisecond, time.Minute)
	g.now = func() time.Time { return now }
	rows := []historyEvent{{id: 1}, {id: 3}, {id: 5}, {id: 7}}
	take, next, held, _ := g.advance(0, rows)
	require.True(t, held)
	require.Len(t, take, 1)
	g.commit(gapPlan{next: next})
	now = now.Add(100 * time.Millisecond)
	take, next, held, passed := g.advance(next, rows[1:])
	require.False(t, held)
	require.Len(t, take, 3, "every hole passed in the same pass")
	require.EqualValues(t, 7, next)
	require.Equal(t, []passedGap{{idRange{2, 2}, now.Add(time.Minute)}, {idRange{4, 4}, now.Add(time.Minute)},
		{idRange{6, 6}, now.Add(time.Minute)}}, passed)
}

// The watched holes survive the round trip through event_relay.watched,
// and a relay taking over starts from them alone.
func TestHistoryGapsWatchedRoundTrip(t *testing.T) {
	until := time.UnixMilli(1_700_000_000_123)
	g := NewHistoryGaps(0, 0)
	g.passed = []passedGap{{idRange{12, 14}, until}, {idRange{20, 20}, until.Add(time.Second)}}
	text := g.watchedText()
	require.Equal(t, "12-14@1700000000123,20-20@1700000001123", text)

	h := NewHistoryGaps(0, 0)
	h.pending[30] = until
	h.passed = []passedGap{{idRange{1, 2}, until}}
	require.NoError(t, h.restore(text))
	require.Equal(t, g.passed, h.passed)
	require.Empty(t, h.pending, "holes past the stored cursor are found again")
	require.NoError(t, h.restore(""))
	require.Zero(t, h.Watched())

	for _, bad := range []string{"12", "12-x@1", "14-12@1", "1-2@3,,x"} {
		h.passed = []passedGap{{idRange{1, 2}, until}}
		require.Error(t, h.restore(bad), bad)
		require.Len(t, h.passed, 1, "nothing changed by %q", bad)
	}
}

// Without gap tracking, rows go out once a row at or past their ID was
// seen Settle ago, holes below that bound or not.
func TestHistorySettled(t *testing.T) {
	now := time.Unix(1000, 0)
	g := NewHistoryGaps(0, 0)
	g.Settle = 100 * time.Millisecond
	g.now = func() time.Time { return now }
	ids := func(hs []historyEvent) []int64 {
		out := []int64{}
		for _, h := range hs {
			out = append(out, h.id)
		}
		return out
	}
	rows := []historyEvent{{id: 11}, {id: 13}}
	take, next, held := g.settled(10, rows, 0)
	require.Equal(t, []int64{}, ids(take), "nothing seen Settle ago yet")
	require.EqualValues(t, 10, next)
	require.True(t, held)

	now = now.Add(60 * time.Millisecond)
	rows = append(rows, historyEvent{id: 16})
	take, next, held = g.settled(10, rows, 0)
	require.Equal(t, []int64{}, ids(take))
	require.EqualValues(t, 10, next)
	require.True(t, held)

	now = now.Add(40 * time.Millisecond) // 13 seen 100 ms ago, 16 only 40
	take, next, held = g.settled(10, rows, 0)
	require.Equal(t, []int64{11, 13}, ids(take), "the hole at 12 is final")
	require.EqualValues(t, 13, next)
	require.True(t, held)

	now = now.Add(60 * time.Millisecond)
	take, next, held = g.settled(13, rows[2:], 0)
	require.Equal(t, []int64{16}, ids(take))
	require.EqualValues(t, 16, next)
	require.False(t, held)
	take, next, held = g.settled(16, nil, 0)
	require.Empty(t, take)
	require.EqualValues(t, 16, next)
	require.False(t, held)

	// A read cut off by its limit marks the newest ID past it: the rows
	// behind wait one Settle, not one per batch.
	take, _, _ = g.settled(16, []historyEvent{{id: 17}, {id: 18}}, 40)
	require.Empty(t, take)
	now = now.Add(100 * time.Millisecond)
	take, next, _ = g.settled(16, []historyEvent{{id: 17}, {id: 18}}, 40)
	require.Equal(t, []int64{17, 18}, ids(take))
	take, next, _ = g.settled(next, []historyEvent{{id: 19}, {id: 40}, {id: 41}}, 41)
	require.Equal(t, []int64{19, 40}, ids(take))
	require.EqualValues(t, 40, next)
}

func TestStatusOfNamesEveryStatusWithoutAllocating(t *testing.T) {
	for _, st := range append([]contracts.Status{contracts.StatusNone, "ARCHIVED"}, contracts.Statuses...) {
		raw := []byte(string(st)) // as the driver hands a column over
		if got := statusOf(raw); got != st {
			t.Fatalf("statusOf(%q) = %q", raw, got)
		}
	}
	raw := []byte("RUNNING")
	if n := testing.AllocsPerRun(100, func() { _ = statusOf(raw) }); n != 0 {
		t.Fatalf("statusOf of a known status allocates %.0f times", n)
	}
}
