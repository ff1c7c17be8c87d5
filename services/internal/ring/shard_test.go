package ring

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// The expected values come from `echo -n ID | md5sum`, not from this code,
// so they pin the hash other processes and languages must reproduce.
func TestShardMatchesMD5OfDecimalID(t *testing.T) {
	tests := []struct {
		id      int64
		want64  int
		want256 int
	}{
		{id: 0, want64: 47, want256: 239},
		{id: 1, want64: 2, want256: 130},
		{id: 42, want64: 39, want256: 39},
		{id: 1700000000000, want64: 63, want256: 127},
		{id: -7, want64: 60, want256: 60},
		{id: 9223372036854775807, want64: 17, want256: 81},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want64, Shard(tt.id, 64), "id %d", tt.id)
		require.Equal(t, tt.want256, Shard(tt.id, 256), "id %d", tt.id)
	}
}

func TestShardCountBounds(t *testing.T) {
	tests := []struct {
		shards int
		ok     bool
	}{
		{-1, false}, {0, false}, {1, true}, {DefaultShards, true}, {256, true}, {MaxShards, true}, {MaxShards + 1, false},
	}
	for _, tt := range tests {
		if tt.ok {
			require.NoError(t, ValidateShards(tt.shards))
			s := Shard(123456789, tt.shards)
			require.True(t, s >= 0 && s < tt.shards, "shard %d of %d", s, tt.shards)
			continue
		}
		require.Error(t, ValidateShards(tt.shards))
		require.Panics(t, func() { Shard(1, tt.shards) }, "shards %d", tt.shards)
	}
}

// snowflake builds a time-ordered ID the way bwmarrin/snowflake lays it
// out: milliseconds, 10 bits of node, 12 bits of per-millisecond sequence.
func snowflake(ms, node, seq int64) int64 { return ms<<22 | node<<12 | seq }

// Both generators reproduce real traffic: a steady 50 IDs per millisecond,
// and a quiet node issuing bursts of 1 to 8 IDs, so its sequence never
// passes 7. The md5 shard must be even for both; the plain modulo is only
// logged, to show why it is not used.
func TestShardSpreadsTimeOrderedIDs(t *testing.T) {
	const n = 100_000
	tests := []struct {
		name string
		id   func(i int64) int64
	}{
		{"50 per ms", func(i int64) int64 { return snowflake(1700000000000+i/50, 0, i%50) }},
		{"bursts of 1 to 8", bursts()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			hashed := make([]int, DefaultShards)
			modulo := make([]int, DefaultShards)
			for i := range int64(n) {
				id := tt.id(i)
				hashed[Shard(id, DefaultShards)]++
				modulo[id%DefaultShards]++
			}
			mean := float64(n) / DefaultShards
			ratio := float64(slices.Max(hashed)) / mean
			t.Logf("md5: busiest/mean %.3f; id%%64: busiest/mean %.2f, top 8 shards hold %.0f%%, %d of %d shards empty",
				ratio, float64(slices.Max(modulo))/mean, 100*topShare(modulo, 8), countZero(modulo), DefaultShards)
			require.LessOrEqual(t, ratio, 1.2)
		})
	}
}

// bursts returns a generator of IDs from a quiet node: each millisecond
// holds a burst of 1, 2, ... 8 IDs in turn, with gaps between bursts.
func bursts() func(int64) int64 {
	ms, seq, size := int64(1700000000000), int64(0), int64(1)
	return func(int64) int64 {
		id := snowflake(ms, 3, seq)
		if seq++; seq == size {
			ms += 1 + size // idle milliseconds between bursts
			seq, size = 0, size%8+1
		}
		return id
	}
}

// countZero is the number of shards that got nothing.
func countZero(counts []int) int {
	n := 0
	for _, c := range counts {
		if c == 0 {
			n++
		}
	}
	return n
}

// topShare is the fraction of all load held by the k busiest shards.
func topShare(counts []int, k int) float64 {
	sorted := slices.Sorted(slices.Values(counts))
	top, total := 0, 0
	for i, c := range sorted {
		total += c
		if i >= len(sorted)-k {
			top += c
		}
	}
	return float64(top) / float64(total)
}
