package gctune_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/axsched/ax/services/internal/gctune"
)

// These tests change the process's collector settings: none runs in
// parallel.

const mib = 1 << 20

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

func TestLimit(t *testing.T) {
	for _, c := range []struct {
		name               string
		live, other, floor uint64
		want               int64
	}{
		{"a small heap gets the floor", 4 * mib, 6 * mib, 32 * mib, 32 * mib},
		{"at the floor's edge", 5 * mib, 6 * mib, 32 * mib, 32 * mib},
		{"a heap past it twice its live size and the headroom", 20 * mib, 6 * mib, 32 * mib, 40*mib + gctune.Headroom + 6*mib},
		{"a large heap never less room than GOGC=100 gives", 1024 * mib, 300 * mib, 32 * mib, 2048*mib + gctune.Headroom + 300*mib},
		{"a floor above all of it", 20 * mib, 6 * mib, 256 * mib, 256 * mib},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := gctune.Limit(c.live, c.other, c.floor); got != c.want {
				t.Fatalf("Limit(%d, %d, %d) = %d, want %d", c.live, c.other, c.floor, got, c.want)
			}
		})
	}
}

// settings reads GOGC and the memory limit as the runtime has them.
func settings() (percent uint64, limit uint64) {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}, {Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

func cycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// clearEnv runs the test without GOGC and GOMEMLIMIT, which would turn
// tuning off.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, v := range []string{"GOGC", "GOMEMLIMIT"} {
		if old, ok := os.LookupEnv(v); ok {
			t.Cleanup(func() { os.Setenv(v, old) })
			os.Unsetenv(v)
		}
	}
}

// start runs gctune.Run until the test ends and waits for it to return.
func start(t *testing.T, floor uint64) context.CancelFunc {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		gctune.Run(ctx, floor, quiet)
	}()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			p, l := settings()
			t.Fatalf("%s: not within 5 s (GOGC %d, limit %d MiB)", what, p, l/mib)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var sink [][]byte

func TestTheLimitFollowsTheLiveHeapAndIsPutBack(t *testing.T) {
	clearEnv(t)
	beforePercent, beforeLimit := settings()
	stop := start(t, 48*mib)
	waitFor(t, "GOGC 400 and the floor", func() bool {
		p, l := settings()
		return p == gctune.Percent && l == 48*mib
	})

	// A live heap of 96 MiB: the limit makes room for twice of it.
	sink = make([][]byte, 96)
	for i := range sink {
		sink[i] = make([]byte, mib)
	}
	runtime.GC()
	waitFor(t, "a limit of twice a 96 MiB live heap and more", func() bool {
		_, l := settings()
		return l >= 2*96*mib+gctune.Headroom
	})

	sink = nil
	runtime.GC()
	waitFor(t, "the floor again once the heap is dead", func() bool {
		_, l := settings()
		return l == 48*mib
	})

	stop()
	if p, l := settings(); p != beforePercent || l != beforeLimit {
		t.Fatalf("after Run: GOGC %d, limit %d; want them back at %d, %d", p, l, beforePercent, beforeLimit)
	}
}

// goalWith8MiBLive is the heap size at which the next collection starts
// (the runtime's heap goal) right after a collection that found 8 MiB
// live: a reading of the runtime's pacing, which load does not change.
func goalWith8MiBLive() uint64 {
	live := make([][]byte, 8*mib/4096)
	for i := range live {
		live[i] = make([]byte, 4096)
	}
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}}
	metrics.Read(s)
	runtime.KeepAlive(live)
	return s[0].Value.Uint64()
}

func TestASmallHeapIsCollectedLessOften(t *testing.T) {
	clearEnv(t)
	untuned := goalWith8MiBLive()
	stop := start(t, gctune.FloorDefault)
	waitFor(t, "tuned", func() bool { p, _ := settings(); return p == gctune.Percent })
	var tuned uint64
	// The limit follows the live heap a reading (100 ms) later.
	waitFor(t, "the goal of a tuned 8 MiB heap", func() bool {
		tuned = goalWith8MiBLive()
		return 2*tuned >= 3*untuned
	})
	_, limit := settings()
	stop()
	t.Logf("heap goal with 8 MiB live: %d MiB untuned, %d MiB tuned (limit %d MiB)", untuned/mib, tuned/mib, limit/mib)
	if tuned > limit {
		t.Fatalf("tuned heap goal %d MiB past the limit %d MiB", tuned/mib, limit/mib)
	}
	if again := goalWith8MiBLive(); 2*again >= 3*untuned {
		t.Fatalf("after Run: heap goal %d MiB, want Go's default again (%d MiB)", again/mib, untuned/mib)
	}
}

func TestTheEnvironmentWins(t *testing.T) {
	for _, v := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Run(v, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(v, map[string]string{"GOGC": "100", "GOMEMLIMIT": "1GiB"}[v])
			if got := gctune.Overridden(); got != v {
				t.Fatalf("Overridden() = %q with %s set, want %q", got, v, v)
			}
			beforePercent, beforeLimit := settings()
			done := make(chan struct{})
			go func() {
				defer close(done)
				gctune.Run(context.Background(), gctune.FloorDefault, quiet)
			}()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatalf("Run with %s set did not return", v)
			}
			if p, l := settings(); p != beforePercent || l != beforeLimit {
				t.Fatalf("Run with %s set changed GOGC %d -> %d, limit %d -> %d", v, beforePercent, p, beforeLimit, l)
			}
		})
	}
	clearEnv(t)
	if got := gctune.Overridden(); got != "" {
		t.Fatalf("Overridden() = %q with neither set", got)
	}
}

func TestAZeroFloorTunesNothing(t *testing.T) {
	clearEnv(t)
	beforePercent, beforeLimit := settings()
	gctune.Run(context.Background(), 0, quiet) // returns at once
	if p, l := settings(); p != beforePercent || l != beforeLimit {
		t.Fatalf("floor 0 changed GOGC %d -> %d, limit %d -> %d", beforePercent, p, beforeLimit, l)
	}
}
