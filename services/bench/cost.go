package bench

import (
	"log/slog"
	"os"
	"strings"
	"time"
)

// procRef names a process whose cost a run reports.
type procRef struct {
	// name is the metric suffix: cpu_s.<name>, peak_rss_mb.<name>.
	name string
	pid  int
	// rss reports the peak resident set too. Only for processes started
	// for the run (or named with --pid): a shared server's VmHWM is its
	// lifetime peak and says nothing about this workload.
	rss bool
	// group, when set, also sums the process into cpu_s.<group> (the five
	// split services into "ax", comparable with `ax up`).
	group string
}

// costMeter takes the CPU time of every process at the start of a measured
// window and reports the deltas at its end.
type costMeter struct {
	procs  []procRef
	start  map[int]time.Duration
	t0     time.Time
	logger *slog.Logger
}

// startCosts opens a window over procs and the harness itself.
func startCosts(procs []procRef, logger *slog.Logger) *costMeter {
	c := &costMeter{start: map[int]time.Duration{}, t0: time.Now(), logger: logger}
	for _, p := range append(procs, procRef{name: harnessName, pid: os.Getpid()}) {
		st, err := ReadProc(p.pid)
		if err != nil {
			logger.Warn("cannot sample process; its cost is left out", "name", p.name, "pid", p.pid, "err", err)
			continue
		}
		c.procs = append(c.procs, p)
		c.start[p.pid] = st.CPU
	}
	return c
}

// stop closes the window: window_s, then cpu_s.<name> and peak_rss_mb.<name>
// per name in first-seen order, the groups, cpu_s.total (everything but the
// harness) and cpu_s.harness. With the count of tasks the window ran
// (tasks > 0) it also divides each CPU time by it: cpu_ms_per_task.<name>,
// so a change that moves cost from ax into MySQL, NATS or Redis shows. It
// must run before the processes exit.
func (c *costMeter) stop(tasks int) []Metric {
	out := c.cpu()
	if tasks <= 0 {
		return out
	}
	for _, m := range out {
		if name, ok := strings.CutPrefix(m.Name, prefixCPU); ok {
			out = append(out, Metric{Name: prefixCPUPerTask + name, Value: m.Value * 1000 / float64(tasks)})
		}
	}
	return out
}

func (c *costMeter) cpu() []Metric {
	out := []Metric{{Name: mWindow, Value: time.Since(c.t0).Seconds()}}
	type sum struct {
		cpu, rss float64
		hasRSS   bool
	}
	sums := map[string]*sum{}
	var order []string
	add := func(name string, cpu time.Duration, rss int64, hasRSS bool) {
		s, ok := sums[name]
		if !ok {
			s = &sum{}
			sums[name] = s
			order = append(order, name)
		}
		s.cpu += cpu.Seconds()
		if hasRSS {
			s.rss += float64(rss) / (1 << 20)
			s.hasRSS = true
		}
	}
	var total float64
	for _, p := range c.procs {
		st, err := ReadProc(p.pid)
		if err != nil {
			c.logger.Warn("process gone before the end of the window; its cost is left out", "name", p.name, "pid", p.pid, "err", err)
			continue
		}
		d := st.CPU - c.start[p.pid]
		if p.group != "" {
			add(p.group, d, st.PeakRSS, p.rss)
		}
		add(p.name, d, st.PeakRSS, p.rss)
		if p.name != harnessName {
			total += d.Seconds()
		}
	}
	for _, name := range order {
		if name == harnessName {
			continue
		}
		out = append(out, Metric{Name: prefixCPU + name, Value: sums[name].cpu})
		if sums[name].hasRSS {
			out = append(out, Metric{Name: prefixRSS + name, Value: sums[name].rss})
		}
	}
	out = append(out, Metric{Name: prefixCPU + cpuTotalName, Value: total})
	if s, ok := sums[harnessName]; ok {
		out = append(out, Metric{Name: prefixCPU + harnessName, Value: s.cpu})
	}
	return out
}
