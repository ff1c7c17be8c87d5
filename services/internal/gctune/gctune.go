// Package gctune spares a small Go heap the collections that Go's default
// pacing makes it pay for, without giving a large heap less room than the
// default does.
//
// With GOGC=100 a collection starts when the heap has grown by the live
// heap (4 MiB at least): an ax process whose live heap is 10-20 MB collects
// every 10-20 MB it allocates, several times a second under load, and the
// collector took a seventh of ax's CPU in the retry workload. A fixed soft
// memory limit (GOMEMLIMIT) with GOGC off or high would collect less, but
// a deployment whose live heap grew towards that limit would then collect
// without pause (up to the runtime's cap of half the CPU): a cliff that
// moves with the load. Instead the limit follows the live heap: it is the
// larger of a floor and twice the live heap plus 16 MiB (plus the runtime's
// memory outside the heap), and GOGC is 400, so that
//
//   - a heap live below floor/5 is collected at five times its size, as
//     GOGC=400 paces it;
//   - a heap live above that is collected when it reaches the floor, or
//     twice its live size plus 16 MiB once that is more: never more often
//     than GOGC=100 would, and never held below its live size.
//
// The live heap is read every 100 ms (runtime/metrics); a heap that grows
// faster than that meets a limit one reading old, which only makes that
// collection early.
//
// The runtime's own knobs win: with GOGC or GOMEMLIMIT in the environment
// nothing is tuned.
package gctune

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

const (
	// Percent is GOGC while tuned: above the limit's pace for every heap
	// past floor/5, so the limit decides when a collection starts.
	Percent = 400
	// Headroom is what the limit adds to twice the live heap.
	Headroom = 16 << 20
	// FloorDefault is the limit of a small heap: the ax processes' live
	// heaps are 10-30 MB under load, so their peak RSS stays where Go's
	// default pacing puts it (docs/benchmarks.md, "Garbage collection").
	FloorDefault = 32 << 20
	// interval is how often the live heap is read.
	interval = 100 * time.Millisecond
)

// Limit is the soft memory limit for a heap of live bytes when other bytes
// of the runtime's memory are not heap (goroutine stacks, metadata): the
// larger of floor and 2·live + Headroom + other. The memory limit counts
// all of the runtime's memory, so other is added for the heap to keep
// its room.
func Limit(live, other, floor uint64) int64 {
	return int64(max(floor, 2*live+Headroom+other))
}

// Overridden names the environment variable that turns tuning off (GOGC
// or GOMEMLIMIT, set), or is empty.
func Overridden() string {
	for _, v := range []string{"GOGC", "GOMEMLIMIT"} {
		if _, ok := os.LookupEnv(v); ok {
			return v
		}
	}
	return ""
}

// samples are the runtime/metrics a tuning step reads.
var samples = []string{
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/memory/classes/heap/free:bytes",
}

// Run tunes the collector until ctx ends, then puts back the GOGC and
// memory limit it found. A floor of 0, or GOGC or GOMEMLIMIT in the
// environment, leaves the runtime as it is, and Run returns at once.
func Run(ctx context.Context, floor uint64, logger *slog.Logger) {
	if floor == 0 {
		return
	}
	if v := Overridden(); v != "" {
		logger.Debug("garbage collector left to the runtime", "set", v)
		return
	}
	s := make([]metrics.Sample, len(samples))
	for i, name := range samples {
		s[i].Name = name
	}
	prevLimit := debug.SetMemoryLimit(step(s, floor))
	prevPercent := debug.SetGCPercent(Percent)
	defer func() {
		debug.SetGCPercent(prevPercent)
		debug.SetMemoryLimit(prevLimit)
	}()
	logger.Debug("garbage collector tuned", "gogc", Percent, "floor_bytes", floor)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			debug.SetMemoryLimit(step(s, floor))
		}
	}
}

// step reads s and returns the limit for what it read.
func step(s []metrics.Sample, floor uint64) int64 {
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	live, total, released, objects, unused, free := v(0), v(1), v(2), v(3), v(4), v(5)
	var other uint64
	if heap := released + objects + unused + free; total > heap {
		other = total - heap
	}
	return Limit(live, other, floor)
}
