package app_test

import (
	"testing"

	"github.com/axsched/ax/services/internal/app"
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
