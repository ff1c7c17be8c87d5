package store_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestMigrationUserPrivilegesSuffice: a user with only the documented
// migration privileges creates the database, migrates it up, all the way
// down and up again; the services' user cannot migrate.
func TestMigrationUserPrivilegesSuffice(t *testing.T) {
	ctx := context.Background()
	cfg, err := mysql.ParseDSN(testenv.MigratedDSN(t))
	require.NoError(t, err)
	cfg.DBName = "axtest_" + testenv.Suffix()
	admin, err := sql.Open("mysql", testenv.AdminDSN(t, cfg.FormatDSN()))
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = admin.Exec("DROP DATABASE IF EXISTS `" + cfg.DBName + "`")
		admin.Close()
	})

	dsn := testenv.MySQLUser(t, cfg.FormatDSN(), store.MigratePrivileges)
	require.NoError(t, store.Migrate(ctx, dsn), "first migration creates the database")
	require.NoError(t, store.MigrateDownTo(ctx, dsn, 0))
	require.NoError(t, store.Migrate(ctx, dsn))
	st, err := store.Status(ctx, dsn)
	require.NoError(t, err)
	require.Equal(t, store.SchemaVersion, st.Version)

	require.NoError(t, store.MigrateDownTo(ctx, dsn, testenv.PreviousSchemaVersion(t)))
	service := testenv.MySQLUser(t, cfg.FormatDSN(), store.ServicePrivileges)
	err = store.Migrate(ctx, service)
	require.Error(t, err, "the services' user must not be able to change the schema")
	require.ErrorContains(t, err, "denied")
	_, err = store.Open(ctx, service, store.Options{})
	require.ErrorIs(t, err, store.ErrSchema)
}
