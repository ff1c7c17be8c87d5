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
			take, next, held := g.advance(tc.cursor, tc.rows)
			require.Equal(t, tc.take, idsOf(take))
			require.Equal(t, tc.next, next)
			require.Equal(t, tc.held, held)
			var passed []idRange
			for _, p := range g.passed {
				require.Equal(t, now.Add(time.Minute), p.until)
				passed = append(passed, p.idRange)
			}
			require.Equal(t, tc.passed, passed)
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
		take, next, held := g.advance(0, rows)
		require.True(t, held)
		require.Len(t, take, 1)
		require.EqualValues(t, 1, next)
	}
	now = now.Add(10 * time.Millisecond)
	take, next, held := g.advance(0, rows)
	require.False(t, held)
	require.Len(t, take, 2)
	require.EqualValues(t, 3, next)
	require.Equal(t, 1, g.Watched())
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
