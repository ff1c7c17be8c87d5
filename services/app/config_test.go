package app_test

import (
	"testing"
	"time"

	"github.com/axsched/ax/services/app"
)

func TestConfigValidateShards(t *testing.T) {
	tests := []struct {
		shards int
		ok     bool
	}{
		{0, true}, // the default, 64
		{64, true},
		{256, true},
		{4096, true},
		{4097, false},
		{-1, false},
	}
	for _, tc := range tests {
		c := app.Config{MySQLDSN: "root@tcp(127.0.0.1:3306)/ax", RedisAddr: "127.0.0.1:6379", NATSURL: "nats://127.0.0.1:4222",
			HTTPAddr: "127.0.0.1:0", Node: "n", Shards: tc.shards}
		err := c.Validate([]app.Service{app.Dispatcher})
		if (err == nil) != tc.ok {
			t.Errorf("shards %d: err = %v, want ok = %v", tc.shards, err, tc.ok)
		}
	}
}

func TestConfigValidateIdempotencyRetention(t *testing.T) {
	for _, tc := range []struct {
		retention time.Duration
		ok        bool
	}{{0, true}, {90 * 24 * time.Hour, true}, {-time.Second, false}} {
		c := app.Config{MySQLDSN: "root@tcp(127.0.0.1:3306)/ax", RedisAddr: "127.0.0.1:6379", NATSURL: "nats://127.0.0.1:4222",
			HTTPAddr: "127.0.0.1:0", Node: "n"}
		c.Reaper.IdempotencyRetention = tc.retention
		if err := c.Validate([]app.Service{app.Reaper}); (err == nil) != tc.ok {
			t.Errorf("retention %s: err = %v, want ok = %v", tc.retention, err, tc.ok)
		}
	}
}

func TestConfigValidateRelaySettle(t *testing.T) {
	for _, tc := range []struct {
		off    bool
		settle time.Duration
		ok     bool
	}{{false, 0, true}, {true, time.Second, true}, {true, 0, false}, {true, -time.Second, false}} {
		c := app.Config{MySQLDSN: "root@tcp(127.0.0.1:3306)/ax", RedisAddr: "127.0.0.1:6379", NATSURL: "nats://127.0.0.1:4222",
			HTTPAddr: "127.0.0.1:0", Node: "n"}
		c.Relay.NoGapTracking, c.Relay.Settle = tc.off, tc.settle
		if err := c.Validate([]app.Service{app.Submitter}); (err == nil) != tc.ok {
			t.Errorf("gap tracking off %v, settle %s: err = %v, want ok = %v", tc.off, tc.settle, err, tc.ok)
		}
	}
}

func TestConfigValidateRelayEventsPerMessage(t *testing.T) {
	for _, tc := range []struct {
		n  int
		ok bool
	}{{0, true}, {1, true}, {64, true}, {1000, true}, {1001, false}, {-1, false}} {
		c := app.Config{MySQLDSN: "root@tcp(127.0.0.1:3306)/ax", RedisAddr: "127.0.0.1:6379", NATSURL: "nats://127.0.0.1:4222",
			HTTPAddr: "127.0.0.1:0", Node: "n"}
		c.Relay.EventsPerMessage = tc.n
		if err := c.Validate([]app.Service{app.Submitter}); (err == nil) != tc.ok {
			t.Errorf("events per message %d: err = %v, want ok = %v", tc.n, err, tc.ok)
		}
	}
}

func TestConfigValidatePreparedStatements(t *testing.T) {
	for _, tc := range []struct {
		n  int
		ok bool
	}{{0, true}, {-1, true}, {1000, true}, {1048576, true}, {1048577, false}} {
		c := app.Config{MySQLDSN: "root@tcp(127.0.0.1:3306)/ax", RedisAddr: "127.0.0.1:6379", NATSURL: "nats://127.0.0.1:4222",
			HTTPAddr: "127.0.0.1:0", Node: "n", MySQLPreparedStatements: tc.n}
		if err := c.Validate([]app.Service{app.Submitter}); (err == nil) != tc.ok {
			t.Errorf("prepared statements %d: err = %v, want ok = %v", tc.n, err, tc.ok)
		}
	}
}
