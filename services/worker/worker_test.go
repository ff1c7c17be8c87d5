package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/executor"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
	"github.com/axsched/ax/services/worker"
)

// TestRunNeverMigrates: a worker on a schema older than it needs refuses
// to start and leaves the schema as it found it.
func TestRunNeverMigrates(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.MigratedDSN(t)
	older := testenv.PreviousSchemaVersion(t)
	require.NoError(t, store.MigrateDownTo(ctx, dsn, older))
	mux := executor.NewMux()
	mux.HandleFunc("billing.refund", func(context.Context, *executor.Task) error { return nil })

	runCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err := worker.Run(runCtx, worker.Config{MySQLDSN: dsn, NATSURL: "nats://127.0.0.1:1", HTTPAddr: "127.0.0.1:0",
		Logger: testenv.Logger(t)}, mux)
	require.ErrorIs(t, err, store.ErrSchema)
	require.ErrorContains(t, err, "ax migrate up")
	st, err := store.Status(ctx, dsn)
	require.NoError(t, err)
	require.Equal(t, older, st.Version, "the worker changed the schema")
}
