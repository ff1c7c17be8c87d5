package main

import (
	"math"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/gctune"
	"github.com/axsched/ax/services/internal/testenv"
)

// A real `ax up` runs with the garbage collector tuned (GOGC 400 and a
// soft memory limit of at least the floor), as its /metrics shows; GOGC in
// its environment wins, and --gc-floor-mib 0 leaves Go's defaults.
func TestAxUpTunesTheGarbageCollector(t *testing.T) {
	bin := filepath.Join(binaries(t), "ax")
	dsn := testenv.MigratedDSN(t)
	for _, c := range []struct {
		name    string
		env     []string
		args    []string
		percent float64
		floor   float64 // 0: no memory limit
	}{
		{"by default", nil, nil, gctune.Percent, gctune.FloorDefault},
		{"a floor of 64 MiB", nil, []string{"--gc-floor-mib", "64"}, gctune.Percent, 64 << 20},
		{"GOGC in the environment", []string{"GOGC=150"}, nil, 150, 0},
		{"a floor of 0", nil, []string{"--gc-floor-mib", "0"}, 100, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, k := testenv.Redis(t)
			addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
			args := append([]string{"up", "--http", addr, "--migrate=false", "--redis-prefix", k.Prefix,
				"--data-dir", t.TempDir(), "--nats-listen", "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))}, c.args...)
			p := startEnv(t, "ax-up", bin, append(c.env, "AX_MYSQL_DSN="+dsn), args...)
			waitReady(t, p, addr)
			var percent, limit float64
			testenv.Eventually(t, 10*time.Second, "the collector's settings on /metrics", func() bool {
				percent, limit = gcSettings(t, addr)
				return percent == c.percent
			})
			if c.floor == 0 {
				require.Equal(t, float64(math.MaxInt64), limit, "go_gc_gomemlimit_bytes: no limit")
			} else {
				require.GreaterOrEqual(t, limit, c.floor, "go_gc_gomemlimit_bytes: at least the floor")
				require.Less(t, limit, float64(math.MaxInt64), "go_gc_gomemlimit_bytes: a limit")
			}
			p.stop(t, 30*time.Second)
		})
	}
	out, err := axEnv(bin, nil, "up", "--gc-floor-mib", "-1", "--mysql-dsn", dsn)
	require.Error(t, err)
	require.Contains(t, out, "--gc-floor-mib -1 is negative")
}

// gcSettings reads go_gc_gogc_percent and go_gc_gomemlimit_bytes from an
// ax's /metrics.
func gcSettings(t *testing.T, addr string) (percent, limit float64) {
	t.Helper()
	s := (&liveAx{addr: addr}).scrape(t)
	percent, okPercent := s.samples["go_gc_gogc_percent"]
	limit, okLimit := s.samples["go_gc_gomemlimit_bytes"]
	require.True(t, okPercent && okLimit, "go_gc_gogc_percent and go_gc_gomemlimit_bytes on /metrics")
	return percent, limit
}
