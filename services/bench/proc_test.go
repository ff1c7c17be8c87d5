package bench

import (
	"os"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name      string
		line      string
		wantComm  string
		wantTicks int64
		wantErr   bool
	}{
		{name: "plain", line: "42 (mariadbd) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 30 0",
			wantComm: "mariadbd", wantTicks: 300},
		{name: "name with spaces and parentheses", line: "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0",
			wantComm: "a (b) c", wantTicks: 7},
		{name: "truncated", line: "7 (ax) R 1 7", wantErr: true},
		{name: "no name", line: "garbage", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			comm, ticks, err := parseStat([]byte(tt.line))
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.wantComm, comm)
			require.Equal(t, tt.wantTicks, ticks)
		})
	}
}

func TestParseHWM(t *testing.T) {
	require.Equal(t, int64(2048<<10), parseHWM([]byte("Name:\tax\nVmPeak:\t 9999 kB\nVmHWM:\t    2048 kB\nVmRSS:\t 1000 kB\n")))
	require.Zero(t, parseHWM([]byte("Name:\tkthreadd\n")), "a kernel thread has none")
}

func TestReadProcOfThisTest(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	before, err := ReadProc(os.Getpid())
	require.NoError(t, err)
	require.NotEmpty(t, before.Comm)
	require.Positive(t, before.PeakRSS)
	// Burn a little CPU so the tick counter must move.
	for end := time.Now().Add(100 * time.Millisecond); time.Now().Before(end); {
	}
	after, err := ReadProc(os.Getpid())
	require.NoError(t, err)
	require.Greater(t, after.CPU, before.CPU)
	require.GreaterOrEqual(t, after.PeakRSS, before.PeakRSS)

	require.Contains(t, FindProcs("", before.Comm), os.Getpid())
	require.False(t, slices.Contains(FindProcs("", "no-such-process-name"), os.Getpid()))
	_, err = ReadProc(-1)
	require.Error(t, err)
}
