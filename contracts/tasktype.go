package contracts

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// Limits of a task type's settings. Durations are stored in whole
// milliseconds, so anything shorter than a millisecond would be stored as 0.
const (
	// MaxTypeDuration bounds timeout, backoff_base and backoff_cap: a
	// longer value is almost certainly a typo ("30h" for "30m").
	MaxTypeDuration = 24 * time.Hour
	// MinTypeDuration is the storage resolution of every type duration.
	MinTypeDuration = time.Millisecond
	// MaxTypeRetries bounds max_retries, the same limit a submission has.
	MaxTypeRetries = 100
	// MaxTypeConcurrency is the largest cap the concurrency column holds.
	MaxTypeConcurrency = math.MaxInt32
)

// TaskType is a registered kind of task and the settings its tasks inherit.
// Executors register types; operators change the settings through
// PUT /v1/types/{name}.
type TaskType struct {
	Name string `json:"name"`
	// Timeout is how long one attempt may run, as a Go duration string.
	Timeout    string   `json:"timeout"`
	MaxRetries int      `json:"max_retries"`
	Priority   Priority `json:"priority"`
	// Concurrency caps the type's RUNNING tasks across the whole cluster;
	// 0 means unlimited (each executor's pool still bounds its own share).
	Concurrency int `json:"concurrency"`
	// BackoffBase is the first retry delay; each retry doubles it, up to
	// BackoffCap. Both are Go duration strings.
	BackoffBase string `json:"backoff_base"`
	BackoffCap  string `json:"backoff_cap"`
	// FailSilently marks non-core work: a task that runs out of retries ends
	// FAILED without a dead letter or an alert.
	FailSilently bool `json:"fail_silently"`
	// Paused types are not dispatched; their tasks wait READY until resumed.
	Paused    bool      `json:"paused"`
	UpdatedAt time.Time `json:"updated_at"`
}

// TaskTypeList is the body of GET /v1/types, ordered by name.
type TaskTypeList struct {
	Types []TaskType `json:"types"`
}

// TaskTypeUpdate is the body of PUT /v1/types/{name}. Every field is
// optional and a missing (or null) field keeps its stored value, so a client
// can pause a type without knowing, and racing on, its other settings.
type TaskTypeUpdate struct {
	Timeout      *string   `json:"timeout,omitempty"`
	MaxRetries   *int      `json:"max_retries,omitempty"`
	Priority     *Priority `json:"priority,omitempty"`
	Concurrency  *int      `json:"concurrency,omitempty"`
	BackoffBase  *string   `json:"backoff_base,omitempty"`
	BackoffCap   *string   `json:"backoff_cap,omitempty"`
	FailSilently *bool     `json:"fail_silently,omitempty"`
	Paused       *bool     `json:"paused,omitempty"`
}

// Empty reports whether the update changes nothing.
func (u TaskTypeUpdate) Empty() bool {
	return u == TaskTypeUpdate{}
}

// Validate explains every field that breaks a rule, or returns nil. It checks
// backoff_cap against backoff_base only when both are given; the caller
// checks the merged result with ValidateBackoff, since one of them may come
// from the stored type.
func (u TaskTypeUpdate) Validate() error {
	if u.Empty() {
		return errors.New("nothing to change: give at least one of timeout, max_retries, priority, " +
			"concurrency, backoff_base, backoff_cap, fail_silently, paused")
	}
	var problems []string
	check := func(err error) {
		if err != nil {
			problems = append(problems, err.Error())
		}
	}
	var base, ceiling time.Duration
	var err error
	if u.Timeout != nil {
		_, err = ParseTypeDuration("timeout", *u.Timeout)
		check(err)
	}
	if u.MaxRetries != nil && (*u.MaxRetries < 0 || *u.MaxRetries > MaxTypeRetries) {
		check(fmt.Errorf("max_retries must be between 0 and %d, got %d", MaxTypeRetries, *u.MaxRetries))
	}
	if u.Priority != nil && u.Priority.Rank() < 0 {
		check(fmt.Errorf("unknown priority %q: want one of high, normal, low", *u.Priority))
	}
	if u.Concurrency != nil && (*u.Concurrency < 0 || *u.Concurrency > MaxTypeConcurrency) {
		check(fmt.Errorf("concurrency must be between 0 and %d (0 means unlimited), got %d", MaxTypeConcurrency, *u.Concurrency))
	}
	baseOK, capOK := false, false
	if u.BackoffBase != nil {
		base, err = ParseTypeDuration("backoff_base", *u.BackoffBase)
		baseOK = err == nil
		check(err)
	}
	if u.BackoffCap != nil {
		ceiling, err = ParseTypeDuration("backoff_cap", *u.BackoffCap)
		capOK = err == nil
		check(err)
	}
	if baseOK && capOK {
		check(ValidateBackoff(base, ceiling))
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// ParseTypeDuration parses the value of a task type's duration field (named
// field in messages): a Go duration greater than zero, at least 1ms and at
// most 24h.
func ParseTypeDuration(field, value string) (time.Duration, error) {
	d, err := time.ParseDuration(value)
	switch {
	case err != nil:
		return 0, fmt.Errorf("%s %q is not a Go duration like \"30s\" or \"5m\"", field, value)
	case d <= 0:
		return 0, fmt.Errorf("%s must be > 0, got %q", field, value)
	case d < MinTypeDuration:
		return 0, fmt.Errorf("%s must be at least %s (durations are stored in milliseconds), got %q", field, MinTypeDuration, value)
	case d > MaxTypeDuration:
		return 0, fmt.Errorf("%s must be at most %s, got %q", field, MaxTypeDuration, value)
	}
	return d, nil
}

// ValidateBackoff checks that retry delays can grow from base up to the cap.
func ValidateBackoff(base, ceiling time.Duration) error {
	if ceiling < base {
		return fmt.Errorf("backoff_cap (%s) must be >= backoff_base (%s)", ceiling, base)
	}
	return nil
}
