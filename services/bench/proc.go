package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of utime and stime in /proc/<pid>/stat. Linux reports
// them in USER_HZ, which is 100 on every architecture Go builds ax for, so
// the harness needs no cgo call to sysconf(_SC_CLK_TCK).
const userHZ = 100

// ProcStat is what the harness reads about one process.
type ProcStat struct {
	// Comm is the executable name the kernel keeps (at most 15 bytes).
	Comm string
	// CPU is user plus system time since the process started.
	CPU time.Duration
	// PeakRSS is VmHWM, the resident set's high-water mark, in bytes.
	PeakRSS int64
}

// ReadProc reads pid's CPU time and peak resident set from /proc.
func ReadProc(pid int) (ProcStat, error) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return ProcStat{}, fmt.Errorf("read process %d: %w", pid, err)
	}
	comm, ticks, err := parseStat(stat)
	if err != nil {
		return ProcStat{}, fmt.Errorf("process %d: %w", pid, err)
	}
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return ProcStat{}, fmt.Errorf("read process %d: %w", pid, err)
	}
	return ProcStat{Comm: comm, CPU: time.Duration(ticks) * time.Second / userHZ, PeakRSS: parseHWM(status)}, nil
}

// parseStat returns the comm and utime+stime (in ticks) of a
// /proc/<pid>/stat line. The comm is in parentheses and may itself contain
// spaces and parentheses, so the fields are counted from the last ')'.
func parseStat(data []byte) (comm string, ticks int64, err error) {
	open, end := bytes.IndexByte(data, '('), bytes.LastIndexByte(data, ')')
	if open < 0 || end < open {
		return "", 0, fmt.Errorf("malformed stat %q", truncate(data))
	}
	// After ")": state(3) ppid(4) ... utime(14) stime(15), 1-based.
	fields := strings.Fields(string(data[end+1:]))
	const utime, stime = 14 - 3, 15 - 3
	if len(fields) <= stime {
		return "", 0, fmt.Errorf("stat has %d fields after the name, want more than %d", len(fields), stime)
	}
	u, err1 := strconv.ParseInt(fields[utime], 10, 64)
	s, err2 := strconv.ParseInt(fields[stime], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, fmt.Errorf("stat utime %q stime %q are not numbers", fields[utime], fields[stime])
	}
	return string(data[open+1 : end]), u + s, nil
}

// parseHWM returns VmHWM from /proc/<pid>/status in bytes; 0 for a process
// without one (a kernel thread or a zombie).
func parseHWM(status []byte) int64 {
	for line := range strings.Lines(string(status)) {
		v, ok := strings.CutPrefix(line, "VmHWM:")
		if !ok {
			continue
		}
		f := strings.Fields(v) // "123456 kB"
		if len(f) == 0 {
			return 0
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0
		}
		return kb << 10
	}
	return 0
}

// FindProcs returns the PIDs whose comm is one of names. When more than one
// process matches and hint is not empty, only those whose command line
// contains hint (a port, say) are kept, unless that would keep none: on a
// shared machine other people's test servers carry the same name.
func FindProcs(hint string, names ...string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var all, hinted []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || !slices.Contains(names, strings.TrimSpace(string(comm))) {
			continue
		}
		all = append(all, pid)
		if cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && hint != "" &&
			strings.Contains(strings.ReplaceAll(string(cmdline), "\x00", " "), hint) {
			hinted = append(hinted, pid)
		}
	}
	if len(all) > 1 && len(hinted) > 0 {
		return hinted
	}
	return all
}

func truncate(b []byte) string {
	if len(b) > 80 {
		return string(b[:80]) + "..."
	}
	return string(b)
}
