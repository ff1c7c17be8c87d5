package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
	migratemysql "github.com/golang-migrate/migrate/v4/database/mysql"
)

// SchemaVersion is the migration this build's SQL needs: the highest one
// in infra/migrations (a test keeps the two equal, so adding a migration
// raises it). A service refuses to start on an older schema.
const SchemaVersion uint = 21

// SchemaAhead is how many migrations newer than SchemaVersion a service
// still runs against, so that `ax migrate up` can go first in a rolling
// upgrade while the older processes keep working. It holds because
// migrations only add (tables, nullable or defaulted columns, indexes)
// and drop nothing the releases within the window still use
// (docs/operations.md, "Migrations").
const SchemaAhead uint = 10

// ErrSchema is the root of every refusal to run on the schema found.
var ErrSchema = errors.New("schema version")

// CheckSchema reads golang-migrate's version table and refuses a schema
// that is dirty, older than SchemaVersion, or more than SchemaAhead newer.
// It needs only SELECT, so it works for the services' DML-only user.
func CheckSchema(ctx context.Context, db *sql.DB, database string) error {
	var (
		version uint
		dirty   bool
	)
	q := "SELECT version, dirty FROM `" + migratemysql.DefaultMigrationsTable + "` LIMIT 1"
	err := db.QueryRowContext(ctx, q).Scan(&version, &dirty)
	var me *mysql.MySQLError
	switch {
	case errors.Is(err, sql.ErrNoRows), errors.As(err, &me) && me.Number == 1146: // no table: never migrated
		version = 0
	case err != nil:
		return fmt.Errorf("read schema version of %s: %w", database, err)
	}
	switch {
	case dirty:
		return fmt.Errorf("%w: database %s is at version %d, dirty (a migration failed half way): fix it by hand, then run `ax migrate up`", ErrSchema, database, version)
	case version < SchemaVersion:
		return fmt.Errorf("%w: database %s is at version %d, this ax needs %d: run `ax migrate up` first (with a user allowed to change the schema)", ErrSchema, database, version, SchemaVersion)
	case version > SchemaVersion+SchemaAhead:
		return fmt.Errorf("%w: database %s is at version %d, newer than this ax (%d) supports (up to %d): upgrade ax", ErrSchema, database, version, SchemaVersion, SchemaVersion+SchemaAhead)
	}
	return nil
}
