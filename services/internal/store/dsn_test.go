package store_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/store"
)

func TestParseDSNTimeouts(t *testing.T) {
	tests := []struct {
		name              string
		dsn               string
		dial, read, write time.Duration
	}{
		{"none given: defaults", "root@tcp(db:3306)/ax",
			store.DialTimeoutDefault, store.ReadTimeoutDefault, store.WriteTimeoutDefault},
		{"the operator's kept", "root@tcp(db:3306)/ax?timeout=2s&readTimeout=5m&writeTimeout=7s",
			2 * time.Second, 5 * time.Minute, 7 * time.Second},
		{"some given", "root@tcp(db:3306)/ax?readTimeout=90s",
			store.DialTimeoutDefault, 90 * time.Second, store.WriteTimeoutDefault},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := store.ParseDSN(tt.dsn)
			require.NoError(t, err)
			require.Equal(t, tt.dial, cfg.Timeout)
			require.Equal(t, tt.read, cfg.ReadTimeout)
			require.Equal(t, tt.write, cfg.WriteTimeout)
		})
	}
}
