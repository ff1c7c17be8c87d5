package contracts

import (
	"strings"
	"testing"
)

func TestTaskTypeUpdateValidate(t *testing.T) {
	tests := []struct {
		name string
		u    TaskTypeUpdate
		want string // substring of the error; empty means valid
	}{
		{"pause only", TaskTypeUpdate{Paused: new(true)}, ""},
		{"every field at its limit", TaskTypeUpdate{Timeout: new("24h"), MaxRetries: new(100), Priority: new(PriorityLow),
			Concurrency: new(0), BackoffBase: new("1ms"), BackoffCap: new("24h"), FailSilently: new(false), Paused: new(false)}, ""},
		{"cap equal to base", TaskTypeUpdate{BackoffBase: new("5s"), BackoffCap: new("5s")}, ""},
		{"no retries", TaskTypeUpdate{MaxRetries: new(0)}, ""},
		{"nothing", TaskTypeUpdate{}, "nothing to change"},
		{"zero timeout", TaskTypeUpdate{Timeout: new("0s")}, `timeout must be > 0, got "0s"`},
		{"negative timeout", TaskTypeUpdate{Timeout: new("-1m")}, "timeout must be > 0"},
		{"sub-millisecond timeout", TaskTypeUpdate{Timeout: new("999us")}, "timeout must be at least 1ms"},
		{"timeout over a day", TaskTypeUpdate{Timeout: new("24h1ms")}, "timeout must be at most 24h0m0s"},
		{"unparsable timeout", TaskTypeUpdate{Timeout: new("5 minutes")}, "not a Go duration"},
		{"empty timeout", TaskTypeUpdate{Timeout: new("")}, "not a Go duration"},
		{"negative retries", TaskTypeUpdate{MaxRetries: new(-1)}, "max_retries must be between 0 and 100, got -1"},
		{"too many retries", TaskTypeUpdate{MaxRetries: new(101)}, "max_retries must be between 0 and 100, got 101"},
		{"unknown priority", TaskTypeUpdate{Priority: new(Priority("urgent"))}, `unknown priority "urgent"`},
		{"empty priority", TaskTypeUpdate{Priority: new(Priority(""))}, `unknown priority ""`},
		{"negative concurrency", TaskTypeUpdate{Concurrency: new(-1)}, "(0 means unlimited), got -1"},
		{"concurrency over the column", TaskTypeUpdate{Concurrency: new(MaxTypeConcurrency + 1)}, "concurrency must be between 0"},
		{"zero backoff base", TaskTypeUpdate{BackoffBase: new("0s")}, "backoff_base must be > 0"},
		{"negative backoff cap", TaskTypeUpdate{BackoffCap: new("-1s")}, "backoff_cap must be > 0"},
		{"cap below base", TaskTypeUpdate{BackoffBase: new("10s"), BackoffCap: new("9s")}, "backoff_cap (9s) must be >= backoff_base (10s)"},
		{"cap over a day", TaskTypeUpdate{BackoffCap: new("25h")}, "backoff_cap must be at most 24h0m0s"},
		{"every problem is listed", TaskTypeUpdate{Timeout: new("0s"), MaxRetries: new(-1), Concurrency: new(-1)},
			`timeout must be > 0, got "0s"; max_retries must be between 0 and 100, got -1; concurrency`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.u.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.want != "" && err == nil:
				t.Fatalf("Validate() = nil, want an error containing %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("Validate() = %q, want it to contain %q", err, tc.want)
			}
		})
	}
}
