package app_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/contracts"
	"github.com/axsched/ax/contracts/client"
	"github.com/axsched/ax/services/app"
	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestServicesRunAsDMLOnlyUser runs the five services as a MySQL user with
// only the documented service privileges: tasks run to SUCCESS, fail into
// dead letters and are re-run, and the relay publishes every history row,
// while that user cannot change the schema.
func TestServicesRunAsDMLOnlyUser(t *testing.T) {
	dsn := testenv.MySQLUser(t, testenv.MigratedDSN(t), store.ServicePrivileges)
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec("CREATE TABLE intruder (id INT)")
	var me *mysql.MySQLError
	require.ErrorAs(t, err, &me, "the service user may not change the schema")
	require.EqualValues(t, 1142, me.Number, "CREATE command denied: %v", err)

	_, k := testenv.Redis(t)
	sys := startSystemOn(t, dsn, app.AllServices, "127.0.0.1:6379", k.Prefix, nil)
	ctx := context.Background()
	ids := submitMany(t, sys.api, 20, 4, contracts.SubmitRequest{Type: "ax.noop"})
	failed, err := sys.api.Submit(ctx, contracts.SubmitRequest{Type: "ax.flaky", MaxRetries: ptr(0),
		Payload: json.RawMessage(`{"fail_times":1}`)})
	require.NoError(t, err)
	for _, id := range ids {
		waitStatus(t, sys.api, id, contracts.StatusSuccess, 30*time.Second)
	}
	waitStatus(t, sys.api, failed.ID, contracts.StatusFailed, 30*time.Second)
	dead, err := sys.api.ListDeadLetters(ctx, client.DeadLetterFilter{})
	require.NoError(t, err)
	require.Len(t, dead.DeadLetters, 1)
	_, err = sys.api.RetryDeadLetter(ctx, dead.DeadLetters[0].ID, "")
	require.NoError(t, err)
	waitStatus(t, sys.api, failed.ID, contracts.StatusSuccess, 30*time.Second)

	want := sys.historyRows(t)
	testenv.Eventually(t, 30*time.Second, "one event per history row", func() bool {
		return streamEvents(t, sys.natsURL) == want
	})
}

// TestServicesRefuseAnOlderSchema: a service on a schema older than it
// needs stops at start with the versions and the command to run; `ax up`
// (Migrate) brings the schema up itself and runs.
func TestServicesRefuseAnOlderSchema(t *testing.T) {
	dsn := testenv.MigratedDSN(t)
	older := testenv.PreviousSchemaVersion(t)
	require.NoError(t, store.MigrateDownTo(context.Background(), dsn, older))
	_, k := testenv.Redis(t)
	for _, services := range [][]app.Service{{app.Submitter}, {app.Executor}, {app.Reaper}} {
		cfg := app.Config{MySQLDSN: dsn, RedisAddr: "127.0.0.1:6379", RedisPrefix: k.Prefix,
			NATSURL: "nats://127.0.0.1:1", HTTPAddr: "127.0.0.1:0", Node: "old"}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := app.Run(ctx, cfg, services, testenv.Logger(t))
		cancel()
		require.ErrorIs(t, err, store.ErrSchema, "%v", services)
		require.ErrorContains(t, err, fmt.Sprintf("at version %d, this ax needs %d: run `ax migrate up` first",
			older, store.SchemaVersion))
	}

	sys := startSystemOn(t, dsn, app.AllServices, "127.0.0.1:6379", k.Prefix, func(c *app.Config) { c.Migrate = true })
	task, err := sys.api.Submit(context.Background(), contracts.SubmitRequest{Type: "ax.noop"})
	require.NoError(t, err)
	waitStatus(t, sys.api, task.ID, contracts.StatusSuccess, 30*time.Second)
}

// TestServicesRunOnANewerSchema: after a newer release's `ax migrate up`
// (the version table says so), the running release keeps working.
func TestServicesRunOnANewerSchema(t *testing.T) {
	dsn := testenv.MigratedDSN(t)
	admin, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	defer admin.Close()
	_, err = admin.Exec("UPDATE schema_migrations SET version = ?", store.SchemaVersion+1)
	require.NoError(t, err)

	_, k := testenv.Redis(t)
	sys := startSystemOn(t, dsn, app.AllServices, "127.0.0.1:6379", k.Prefix, nil)
	task, err := sys.api.Submit(context.Background(), contracts.SubmitRequest{Type: "ax.noop"})
	require.NoError(t, err)
	waitStatus(t, sys.api, task.ID, contracts.StatusSuccess, 30*time.Second)
}
