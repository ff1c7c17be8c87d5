package app_test

import (
	"testing"
	"time"

	"github.com/axsched/ax/services/app"
	"github.com/axsched/ax/services/reaper"
)

// TestConfigValidateRetention: a retention is 0 (for ever) or at least a
// minute, and AX_EVENTS keeps events at least its de-duplication window.
func TestConfigValidateRetention(t *testing.T) {
	for _, tc := range []struct {
		name      string
		retention reaper.RetentionConfig
		maxAge    time.Duration
		ok        bool
	}{
		{"defaults", reaper.RetentionConfig{Success: reaper.RetainSuccessDefault, Cancelled: reaper.RetainCancelledDefault,
			Failed: reaper.RetainFailedDefault}, 7 * 24 * time.Hour, true},
		{"forever", reaper.RetentionConfig{}, 0, true},
		{"a minute", reaper.RetentionConfig{Success: time.Minute}, 2 * time.Minute, true},
		{"seconds", reaper.RetentionConfig{Success: 30 * time.Second}, 0, false},
		{"no unit", reaper.RetentionConfig{Failed: 720}, 0, false},
		{"negative", reaper.RetentionConfig{Cancelled: -time.Hour}, 0, false},
		{"events too short", reaper.RetentionConfig{}, time.Minute, false},
		{"events negative", reaper.RetentionConfig{}, -time.Hour, false},
	} {
		c := app.Config{MySQLDSN: "root@tcp(127.0.0.1:3306)/ax", RedisAddr: "127.0.0.1:6379", NATSURL: "nats://127.0.0.1:4222",
			HTTPAddr: "127.0.0.1:0", Node: "n", EventsMaxAge: tc.maxAge}
		c.Reaper.Retention = tc.retention
		if err := c.Validate([]app.Service{app.Reaper}); (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want ok = %v", tc.name, err, tc.ok)
		}
	}
}
