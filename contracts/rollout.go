package contracts

import (
	"fmt"
	"strings"
	"time"
)

// Rollout states.
const (
	// RolloutNone is the state GET answers for a type that never had one.
	RolloutNone       = "none"
	RolloutRunning    = "running"
	RolloutPaused     = "paused"
	RolloutRolledBack = "rolled_back"
	RolloutPromoted   = "promoted"
)

// DefaultRolloutSteps are the percents a rollout walks through when none
// are given.
var DefaultRolloutSteps = []int{5, 10, 30, 50, 100}

// RolloutRequest is the body of PUT /v1/types/{name}/rollout: start sending
// a share of the type's new tasks to executors of Version. Empty fields
// take the defaults (docs/rollout.md).
type RolloutRequest struct {
	Version string `json:"version"`
	// Steps are the percents, strictly increasing, each 1..100.
	Steps []int `json:"steps,omitempty"`
	// StepTime is how long the guard must hold before the next step (Go
	// duration, default 10m).
	StepTime string `json:"step_time,omitempty"`
	// Grace is how long a task waits for a version with no live executor
	// before it falls back to the other (default 30s).
	Grace string       `json:"grace,omitempty"`
	Guard RolloutGuard `json:"guard,omitempty"`
}

// RolloutGuard compares the canary with the stable executors over Window.
type RolloutGuard struct {
	// Window is how far back runs are compared (Go duration, default 5m).
	Window string `json:"window,omitempty"`
	// MinSamples is how many runs each version needs in the window before
	// the guard judges at all (default 100).
	MinSamples int `json:"min_samples,omitempty"`
	// MaxP99Worse is how much slower the canary's p99 may be, as a fraction
	// of the stable p99 (default 0.10: more than 10 % slower breaches).
	MaxP99Worse *float64 `json:"max_p99_worse,omitempty"`
	// MaxFailureDiff and MaxTimeoutDiff are how far the canary's failure
	// and timeout rates may exceed the stable ones, as fractions (default
	// 0.02 each: two percentage points).
	MaxFailureDiff *float64 `json:"max_failure_diff,omitempty"`
	MaxTimeoutDiff *float64 `json:"max_timeout_diff,omitempty"`
}

// VersionStats are one side of the guard's comparison over the window.
type VersionStats struct {
	Version     string  `json:"version"`
	Runs        int     `json:"runs"`
	FailureRate float64 `json:"failure_rate"`
	TimeoutRate float64 `json:"timeout_rate"`
	P50Ms       int64   `json:"p50_ms"`
	P99Ms       int64   `json:"p99_ms"`
}

// RolloutVerdict is the guard's judgement: "insufficient" (too few runs on
// either side), "holds" or "breach", with the reason.
type RolloutVerdict struct {
	Verdict string `json:"verdict"`
	Reason  string `json:"reason"`
}

// Rollout is the body of GET /v1/types/{name}/rollout.
type Rollout struct {
	Type          string         `json:"type"`
	Version       string         `json:"version"`
	State         string         `json:"state"`
	Percent       int            `json:"percent"`
	Steps         []int          `json:"steps"`
	Step          int            `json:"step"`
	StepTime      string         `json:"step_time"`
	StepStartedAt time.Time      `json:"step_started_at"`
	Grace         string         `json:"grace"`
	Guard         RolloutGuard   `json:"guard"`
	Canary        VersionStats   `json:"canary"`
	Stable        VersionStats   `json:"stable"`
	Verdict       RolloutVerdict `json:"verdict"`
	Log           []RolloutLog   `json:"log"`
	// Warnings are said but do not stop the request (a version no live
	// executor reports, say).
	Warnings []string `json:"warnings,omitempty"`
}

// RolloutLog is one move of a rollout.
type RolloutLog struct {
	Action      string    `json:"action"`
	FromPercent int       `json:"from_percent"`
	ToPercent   int       `json:"to_percent"`
	Reason      string    `json:"reason"`
	Figures     string    `json:"figures,omitempty"`
	Actor       string    `json:"actor"`
	At          time.Time `json:"at"`
}

// MaxVersionLen bounds an executor version label.
const MaxVersionLen = 64

// RolloutPlan is a validated RolloutRequest with the defaults filled in.
type RolloutPlan struct {
	Version                                     string
	Steps                                       []int
	StepTime, Grace, Window                     time.Duration
	MinSamples                                  int
	MaxP99Worse, MaxFailureDiff, MaxTimeoutDiff float64
}

// Plan validates the request and fills in the defaults: steps 5, 10, 30,
// 50, 100; 10 minutes a step; a 30 s grace; a 5 minute window of at least
// 100 runs a side; p99 at most 10 % worse, failure and timeout rates at
// most 2 points worse.
func (r RolloutRequest) Plan() (RolloutPlan, error) {
	p := RolloutPlan{Version: r.Version, Steps: r.Steps, StepTime: 10 * time.Minute, Grace: 30 * time.Second,
		Window: 5 * time.Minute, MinSamples: 100, MaxP99Worse: 0.10, MaxFailureDiff: 0.02, MaxTimeoutDiff: 0.02}
	if r.Version == "" || len(r.Version) > MaxVersionLen || strings.ContainsAny(r.Version, " \t\r\n") {
		return p, fmt.Errorf("version %q: want 1 to %d characters without spaces", r.Version, MaxVersionLen)
	}
	if len(p.Steps) == 0 {
		p.Steps = DefaultRolloutSteps
	}
	for i, s := range p.Steps {
		if s < 1 || s > 100 {
			return p, fmt.Errorf("step %d is %d %%: percents must be within 1..100", i+1, s)
		}
		if i > 0 && s <= p.Steps[i-1] {
			return p, fmt.Errorf("steps must increase: %d %% follows %d %%", s, p.Steps[i-1])
		}
	}
	for _, d := range []struct {
		name string
		v    string
		dst  *time.Duration
		min  time.Duration
	}{{"step_time", r.StepTime, &p.StepTime, time.Second}, {"grace", r.Grace, &p.Grace, 0},
		{"guard.window", r.Guard.Window, &p.Window, time.Second}} {
		if d.v == "" {
			continue
		}
		v, err := time.ParseDuration(d.v)
		if err != nil || v < d.min || v > 7*24*time.Hour {
			return p, fmt.Errorf("%s %q: want a Go duration from %s to 168h", d.name, d.v, d.min)
		}
		*d.dst = v
	}
	if r.Guard.MinSamples < 0 {
		return p, fmt.Errorf("guard.min_samples %d: want at least 1", r.Guard.MinSamples)
	}
	if r.Guard.MinSamples > 0 {
		p.MinSamples = r.Guard.MinSamples
	}
	for _, f := range []struct {
		name string
		v    *float64
		dst  *float64
	}{{"guard.max_p99_worse", r.Guard.MaxP99Worse, &p.MaxP99Worse}, {"guard.max_failure_diff", r.Guard.MaxFailureDiff, &p.MaxFailureDiff},
		{"guard.max_timeout_diff", r.Guard.MaxTimeoutDiff, &p.MaxTimeoutDiff}} {
		if f.v == nil {
			continue
		}
		if !(*f.v >= 0 && *f.v <= 10) {
			return p, fmt.Errorf("%s %v: want a fraction from 0 to 10 (0.1 = 10 %%)", f.name, *f.v)
		}
		*f.dst = *f.v
	}
	return p, nil
}
