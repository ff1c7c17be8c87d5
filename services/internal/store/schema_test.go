package store_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/store"
	"github.com/axsched/ax/services/internal/testenv"
)

// TestSchemaVersionIsTheNewestMigration keeps the version a build needs
// equal to its newest migration, so adding one forces the constant up.
func TestSchemaVersionIsTheNewestMigration(t *testing.T) {
	versions := embeddedVersions(t)
	require.Equal(t, versions[len(versions)-1], store.SchemaVersion,
		"store.SchemaVersion must name the newest migration in infra/migrations")
}

// TestOpenChecksTheSchemaVersion: Open runs on the schema it was built for
// and on newer ones within the window, and refuses an older, a dirty, a
// far newer and a missing schema with a message naming the versions and
// the command to run; it never creates the database.
func TestOpenChecksTheSchemaVersion(t *testing.T) {
	ctx := context.Background()
	newest := store.SchemaVersion + store.SchemaAhead
	cases := []struct {
		name    string
		version int64 // -1: no version row; -2: no version table
		dirty   bool
		wantErr []string
	}{
		{name: "current", version: int64(store.SchemaVersion)},
		{name: "one newer", version: int64(store.SchemaVersion) + 1},
		{name: "newest in window", version: int64(newest)},
		{name: "one older", version: int64(store.SchemaVersion) - 1,
			wantErr: []string{fmt.Sprintf("at version %d, this ax needs %d", store.SchemaVersion-1, store.SchemaVersion), "ax migrate up"}},
		{name: "never migrated", version: -2,
			wantErr: []string{fmt.Sprintf("at version 0, this ax needs %d", store.SchemaVersion), "ax migrate up"}},
		{name: "empty version table", version: -1, wantErr: []string{"at version 0", "ax migrate up"}},
		{name: "dirty", version: int64(store.SchemaVersion), dirty: true, wantErr: []string{"dirty", "ax migrate up"}},
		{name: "beyond window", version: int64(newest) + 1,
			wantErr: []string{fmt.Sprintf("at version %d, newer than this ax (%d) supports (up to %d)", newest+1, store.SchemaVersion, newest), "upgrade ax"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dsn := testenv.MySQLDSN(t)
			db := rootDB(t, dsn)
			switch tc.version {
			case -2:
				_, err := db.Exec("DROP TABLE schema_migrations")
				require.NoError(t, err)
			case -1:
				_, err := db.Exec("DELETE FROM schema_migrations")
				require.NoError(t, err)
			default:
				_, err := db.Exec("UPDATE schema_migrations SET version = ?, dirty = ?", tc.version, tc.dirty)
				require.NoError(t, err)
			}
			s, err := store.Open(ctx, dsn, store.Options{})
			if len(tc.wantErr) == 0 {
				require.NoError(t, err)
				require.NoError(t, s.Close())
				return
			}
			require.ErrorIs(t, err, store.ErrSchema)
			for _, want := range tc.wantErr {
				require.ErrorContains(t, err, want)
			}
		})
	}

	t.Run("missing database", func(t *testing.T) {
		dsn := testenv.MySQLDSN(t)
		cfg, err := mysql.ParseDSN(dsn)
		require.NoError(t, err)
		cfg.DBName = "axmissing_" + testenv.Suffix()
		_, err = store.Open(ctx, cfg.FormatDSN(), store.Options{})
		require.ErrorIs(t, err, store.ErrSchema)
		require.ErrorContains(t, err, "database "+cfg.DBName+" does not exist")
		require.ErrorContains(t, err, "ax migrate up")
		var n int
		require.NoError(t, rootDB(t, dsn).QueryRow(
			"SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", cfg.DBName).Scan(&n))
		require.Zero(t, n, "Open must not create the database")
	})
}

// rootDB opens the test database as the administrative user (the one
// AX_TEST_MYSQL_DSN names), which may change the schema.
func rootDB(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", testenv.AdminDSN(t, dsn))
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	if err := db.Ping(); err != nil {
		t.Fatal(errors.Join(errors.New("admin connection"), err))
	}
	return db
}
