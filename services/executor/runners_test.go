package executor

import (
	"sync"
	"testing"
	"time"

	"github.com/axsched/ax/services/internal/testenv"
)

// Work given one piece after another runs on the runner already there;
// work given at once runs side by side on runners of its own; idle
// runners exit after their idle time, and at once on stop.
func TestRunnersAreReused(t *testing.T) {
	rs := newRunners(time.Minute)
	for i := range 50 {
		done := make(chan struct{})
		rs.Go(func() { close(done) })
		<-done
		// The runner reaches its wait for work soon after fn returns.
		testenv.Eventually(t, 5*time.Second, "the runner idle", func() bool { return rs.waiting.Load() == 1 })
		if got := rs.started.Load(); got != 1 {
			t.Fatalf("after %d pieces of work one after another: %d runners started, want 1", i+1, got)
		}
	}

	const n = 8
	var wg sync.WaitGroup
	release := make(chan struct{})
	wg.Add(n)
	for range n {
		rs.Go(func() { defer wg.Done(); <-release })
	}
	if got := rs.started.Load(); got != n {
		t.Fatalf("%d pieces of work at once, one runner idle: %d runners started, want %d", n, got, n)
	}
	close(release)
	wg.Wait()
	testenv.Eventually(t, 5*time.Second, "the runners live", func() bool { return rs.live.Load() == n })
	rs.stop()
	testenv.Eventually(t, 5*time.Second, "every runner gone after stop", func() bool { return rs.live.Load() == 0 })

	done := make(chan struct{})
	rs.Go(func() { close(done) })
	<-done
	testenv.Eventually(t, 5*time.Second, "a runner started after stop gone once done", func() bool { return rs.live.Load() == 0 })
}

func TestIdleRunnersExit(t *testing.T) {
	rs := newRunners(20 * time.Millisecond)
	var wg sync.WaitGroup
	wg.Add(3)
	for range 3 {
		rs.Go(wg.Done)
	}
	wg.Wait()
	testenv.Eventually(t, 5*time.Second, "idle runners gone", func() bool { return rs.live.Load() == 0 })
}
