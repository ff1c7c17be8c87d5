package ring

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"strconv"
)

// Shard counts. DefaultShards is what a cluster uses unless configured
// otherwise; 256 is the supported larger setting; MaxShards bounds the
// assignment table so a typo cannot allocate millions of entries.
const (
	DefaultShards = 64
	MaxShards     = 4096
)

// ValidateShards reports whether n is a usable shard count (1..MaxShards).
// Config loaders call it so that Shard never has to panic in production.
func ValidateShards(n int) error {
	if n < 1 || n > MaxShards {
		return fmt.Errorf("ring: shard count %d outside 1..%d", n, MaxShards)
	}
	return nil
}

// Shard maps a task ID to one of shards shards: the first 8 bytes of
// md5(decimal ID) as a big-endian uint64, modulo shards. Hashing (rather
// than taking the ID modulo shards) matters because snowflake IDs are time
// ordered and their low bits are a per-millisecond sequence that is mostly
// small, so a plain modulo piles the load onto a few shards. The decimal
// form is hashed so that any process, in any language, can recompute the
// shard from the ID as it appears in the API and the database.
//
// Shard panics if shards is outside 1..MaxShards; validate configured
// counts with ValidateShards first.
func Shard(taskID int64, shards int) int {
	if err := ValidateShards(shards); err != nil {
		panic(err)
	}
	var buf [20]byte // fits any int64 in decimal, so hashing does not allocate
	sum := md5.Sum(strconv.AppendInt(buf[:0], taskID, 10))
	return int(binary.BigEndian.Uint64(sum[:8]) % uint64(shards))
}
