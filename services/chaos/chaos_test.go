package chaos

import (
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/axsched/ax/contracts"
)

// Settings of every scenario. The lease is short so that freezing an
// executor past it fits in a scenario; every other setting is ax's default.
const (
	loadFor   = 45 * time.Second
	faultAt   = 15 * time.Second
	loadRate  = 40 // submissions per second
	lockTTL   = 15 * time.Second
	settleMax = 3 * time.Minute
)

// scenario is one fault, injected once under load.
type scenario struct {
	name  string
	fault func(t *testing.T, s *system)
}

func killAndRestart(name string, down time.Duration) func(*testing.T, *system) {
	return func(t *testing.T, s *system) {
		p := s.byName(name)
		p.kill9(t)
		time.Sleep(down)
		s.restart(t, p)
	}
}

func freeze(name string, d time.Duration) func(*testing.T, *system) {
	return func(t *testing.T, s *system) {
		p := s.byName(name)
		p.signal(t, syscall.SIGSTOP)
		time.Sleep(d)
		p.signal(t, syscall.SIGCONT)
	}
}

// killBetweenLeaseAndClaim restarts exec-a armed with the fault hook, so it
// kills itself after taking the leases of its 20th claim and before the
// claim commits, then starts it again unarmed.
func killBetweenLeaseAndClaim(t *testing.T, s *system) {
	p := s.services["exec-a"]
	p.kill9(t)
	env := p.env
	p.env = append(slices.Clone(env), "AX_FAULT_KILL_AFTER_LEASE=20")
	s.restart(t, p)
	p.wait(t, 60*time.Second)
	p.env = env
	time.Sleep(2 * time.Second)
	s.restart(t, p)
}

func (s *system) byName(name string) *proc {
	switch name {
	case "mysql":
		return s.mysql
	case "redis":
		return s.redis
	case "nats":
		return s.nats
	}
	return s.services[name]
}

var scenarios = []scenario{
	{"kill -9 submitter", killAndRestart("submitter", 2*time.Second)},
	{"kill -9 timer", killAndRestart("timer", 2*time.Second)},
	{"kill -9 dispatcher", killAndRestart("dispatcher", 2*time.Second)},
	{"kill -9 executor", killAndRestart("exec-a", 2*time.Second)},
	{"kill -9 reaper", killAndRestart("reaper", 2*time.Second)},
	{"SIGSTOP executor past its lease", freeze("exec-a", lockTTL+10*time.Second)},
	{"kill -9 executor between lease and claim", killBetweenLeaseAndClaim},
	{"Redis FLUSHALL", func(t *testing.T, s *system) {
		rdb := redis.NewClient(&redis.Options{Addr: s.redisURL})
		defer rdb.Close()
		if err := rdb.FlushAll(context.Background()).Err(); err != nil {
			t.Fatalf("FLUSHALL on the private redis: %v", err)
		}
	}},
	{"Redis kill -9 and restart (empty)", killAndRestart("redis", 3*time.Second)},
	{"NATS kill -9 and restart", killAndRestart("nats", 3*time.Second)},
	{"MySQL kill -9 and restart", killAndRestart("mysql", 3*time.Second)},
	{"MySQL frozen (SIGSTOP 20 s)", freeze("mysql", 20*time.Second)},
}

// TestChaos runs every scenario (or those whose name contains AX_CHAOS_ONLY)
// and fails on a lost, early or unexplained task.
func TestChaos(t *testing.T) {
	if os.Getenv("AX_CHAOS") != "1" {
		t.Skip("the chaos suite runs with `make chaos` (AX_CHAOS=1)")
	}
	bin := binDir(t)
	only := os.Getenv("AX_CHAOS_ONLY")
	var verdicts []verdict
	for _, sc := range scenarios {
		if only != "" && !strings.Contains(sc.name, only) {
			continue
		}
		t.Run(strings.ReplaceAll(sc.name, " ", "_"), func(t *testing.T) {
			v := runScenario(t, bin, sc)
			verdicts = append(verdicts, v)
			t.Logf("%s: %s", sc.name, v.line())
			t.Logf("  slowest: %s", v.worstTask)
			for _, e := range v.examples {
				t.Log("  " + e)
			}
			if v.lost > 0 || v.early > 0 || v.dupUnexpl > 0 {
				t.Errorf("%s: %d lost, %d early, %d unexplained duplicates", sc.name, v.lost, v.early, v.dupUnexpl)
			}
		})
	}
	if path := os.Getenv("AX_CHAOS_REPORT"); path != "" {
		if err := os.WriteFile(path, []byte(report(verdicts)), 0o644); err != nil {
			t.Errorf("write report: %v", err)
		}
	}
}

func runScenario(t *testing.T, bin string, sc scenario) verdict {
	dir := t.TempDir()
	s := startServers(t, dir, bin)
	rcv := startReceiver(t)
	s.startServices(t, rcv.url, []string{"--lock-ttl", lockTTL.String()})
	ctx := context.Background()
	// The type's settings: retries enough that a planned failure and a
	// fault together never exhaust them, backoff short.
	if _, err := s.api.UpdateType(ctx, taskType, typeUpdate()); err != nil {
		t.Fatalf("configure %s: %v", taskType, err)
	}

	loadavg := sampleLoad(t)
	faultDone := make(chan struct{})
	go func() {
		defer close(faultDone)
		time.Sleep(faultAt)
		t.Logf("fault: %s", sc.name)
		sc.fault(t, s)
		t.Logf("fault over: %s", sc.name)
	}()
	tasks, refused := load(ctx, s.api, loadFor, loadRate)
	<-faultDone
	waitSettled(ctx, t, s.db, settleMax)
	v := check(ctx, t, s.db, tasks, rcv.snapshot())
	v.scenario, v.refused = sc.name, refused
	v.loadMin, v.loadMax = loadavg()
	if t.Failed() || v.lost > 0 || v.dupUnexpl > 0 {
		for _, name := range s.order {
			t.Logf("---- %s log tail ----\n%s", name, s.services[name].tail())
		}
	}
	return v
}

func (v verdict) line() string {
	return fmt.Sprintf("acked %d (refused %d), lost %d, early %d, duplicates explained %d / unexplained %d, recoveries %d, start delay p50 %s p99 %s max %s, load average %.1f–%.1f",
		v.acked, v.refused, v.lost, v.early, v.dupExplained, v.dupUnexpl, v.recoveries,
		v.p(0.5).Round(time.Millisecond), v.p(0.99).Round(time.Millisecond), v.worst.Round(time.Millisecond), v.loadMin, v.loadMax)
}

func report(vs []verdict) string {
	var b strings.Builder
	b.WriteString("| scenario | acked (refused) | lost | early | duplicates explained / unexplained | recoveries recorded | start delay p99 | worst (the slowest recovery) | load average |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 2, 64) + " s" }
	for _, v := range vs {
		fmt.Fprintf(&b, "| %s | %d (%d) | %d | %d | %d / %d | %d | %s | %s | %.1f–%.1f |\n", v.scenario, v.acked, v.refused, v.lost,
			v.early, v.dupExplained, v.dupUnexpl, v.recoveries, secs(v.p(0.99)), secs(v.worst), v.loadMin, v.loadMax)
	}
	return b.String()
}

func typeUpdate() contracts.TaskTypeUpdate {
	timeout, base, ceiling, retries := "30s", "200ms", "2s", 5
	return contracts.TaskTypeUpdate{Timeout: &timeout, BackoffBase: &base, BackoffCap: &ceiling, MaxRetries: &retries}
}

// sampleLoad reads the machine's one-minute load average every five
// seconds until the returned function is called, which gives the least and
// the most seen: the suite's figures depend on what else ran.
func sampleLoad(t *testing.T) func() (lo, hi float64) {
	t.Helper()
	var mu sync.Mutex
	lo, hi := math.Inf(1), 0.0
	read := func() {
		data, err := os.ReadFile("/proc/loadavg")
		if err != nil {
			return
		}
		f, err := strconv.ParseFloat(strings.Fields(string(data))[0], 64)
		if err != nil {
			return
		}
		mu.Lock()
		lo, hi = min(lo, f), max(hi, f)
		mu.Unlock()
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Second)
		defer tick.Stop()
		for {
			read()
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	end := func() (float64, float64) {
		once.Do(func() { close(stop); <-done })
		read()
		mu.Lock()
		defer mu.Unlock()
		if math.IsInf(lo, 1) {
			return 0, 0
		}
		return lo, hi
	}
	t.Cleanup(func() { end() })
	return end
}
