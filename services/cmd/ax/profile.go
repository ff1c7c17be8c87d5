package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

// startCPUProfile profiles the process into path until the returned stop is
// called (at a clean exit of a server command), so `ax bench --cpuprofile`
// and operators can see where a real process spends its time. An empty
// path profiles nothing.
func startCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile %s: %w", path, err)
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("cpu profile %s: %w", path, err)
		}
		return nil
	}, nil
}
