package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStartCPUProfile(t *testing.T) {
	stop, err := startCPUProfile("")
	require.NoError(t, err)
	require.NoError(t, stop(), "no path profiles nothing")

	path := filepath.Join(t.TempDir(), "cpu.pprof")
	stop, err = startCPUProfile(path)
	require.NoError(t, err)
	require.NoError(t, stop())
	info, err := os.Stat(path)
	require.NoError(t, err)
	require.Positive(t, info.Size(), "a profile, even of an idle process, has a header")

	_, err = startCPUProfile(filepath.Join(t.TempDir(), "missing", "cpu.pprof"))
	require.Error(t, err)
}
