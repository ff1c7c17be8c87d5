package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-sql-driver/mysql"
	"github.com/golang-migrate/migrate/v4"
	migratemysql "github.com/golang-migrate/migrate/v4/database/mysql"
	"github.com/golang-migrate/migrate/v4/source/iofs"

	"github.com/axsched/ax/infra/migrations"
)

// MigrationStatus is where the schema stands.
type MigrationStatus struct {
	Version uint
	Dirty   bool
	Latest  uint
}

// newMigrator opens a dedicated connection (migrations need
// multiStatements) and binds it to the embedded migration files.
func newMigrator(ctx context.Context, dsn string) (*migrate.Migrate, func(), error) {
	cfg, err := ParseDSN(dsn)
	if err != nil {
		return nil, nil, err
	}
	if err := ensureDatabase(ctx, cfg); err != nil {
		return nil, nil, err
	}
	cfg.MultiStatements = true
	cfg.InterpolateParams = false
	// A migration may rebuild a large table for many minutes without a
	// packet: only the operator's own I/O timeouts apply to it, not the
	// defaults ParseDSN adds for the services' short statements.
	raw, _ := mysql.ParseDSN(dsn) // ParseDSN above already accepted it
	cfg.ReadTimeout, cfg.WriteTimeout = raw.ReadTimeout, raw.WriteTimeout
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return nil, nil, fmt.Errorf("open mysql for migrations: %w", err)
	}
	driver, err := migratemysql.WithInstance(db, &migratemysql.Config{})
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migration driver: %w", err)
	}
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migration source: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "mysql", driver)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migrator: %w", err)
	}
	return m, func() { m.Close() }, nil
}

// Migrate applies every pending migration. It is safe to run concurrently
// from several processes: golang-migrate takes a MySQL advisory lock.
func Migrate(ctx context.Context, dsn string) error {
	m, closeFn, err := newMigrator(ctx, dsn)
	if err != nil {
		return err
	}
	defer closeFn()
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate up: %w", err)
	}
	return nil
}

// MigrateDownTo reverts applied migrations, newest first, until the schema
// is at version (0: every table of ax is gone). Reverting a migration may
// lose what only its schema holds (each .down.sql says what); stop the
// services first. A version above the applied one is refused.
func MigrateDownTo(ctx context.Context, dsn string, version uint) error {
	m, closeFn, err := newMigrator(ctx, dsn)
	if err != nil {
		return err
	}
	defer closeFn()
	current, dirty, err := m.Version()
	if errors.Is(err, migrate.ErrNilVersion) {
		return errors.New("migrate down: no migration is applied")
	}
	if err != nil {
		return fmt.Errorf("migration version: %w", err)
	}
	if dirty {
		return fmt.Errorf("migrate down: version %d is dirty (a migration failed half way); fix it by hand first", current)
	}
	if version > current {
		return fmt.Errorf("migrate down: target version %d is above the applied version %d (use `ax migrate up`)", version, current)
	}
	if version == 0 {
		err = m.Down()
	} else {
		err = m.Migrate(version)
	}
	if err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("migrate down to %d: %w", version, err)
	}
	return nil
}

// Status reports the applied and the latest embedded migration versions.
func Status(ctx context.Context, dsn string) (MigrationStatus, error) {
	m, closeFn, err := newMigrator(ctx, dsn)
	if err != nil {
		return MigrationStatus{}, err
	}
	defer closeFn()
	var st MigrationStatus
	v, dirty, err := m.Version()
	if err != nil && !errors.Is(err, migrate.ErrNilVersion) {
		return st, fmt.Errorf("migration version: %w", err)
	}
	st.Version, st.Dirty = v, dirty
	src, err := iofs.New(migrations.FS, ".")
	if err != nil {
		return st, fmt.Errorf("migration source: %w", err)
	}
	defer src.Close()
	latest, err := src.First()
	for err == nil {
		st.Latest = latest
		latest, err = src.Next(latest)
	}
	return st, nil
}

// ensureDatabase creates the database named in cfg if it is missing; only
// migrations do, as the services' user may not create databases.
func ensureDatabase(ctx context.Context, cfg *mysql.Config) error {
	root := cfg.Clone()
	root.DBName = ""
	db, err := sql.Open("mysql", root.FormatDSN())
	if err != nil {
		return fmt.Errorf("open mysql: %w", err)
	}
	defer db.Close()
	// Looked up first, so that a user without CREATE (the services' one,
	// reading `ax migrate status`) gets on with an existing database.
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.schemata WHERE schema_name = ?", cfg.DBName).Scan(&n); err != nil {
		return fmt.Errorf("look up database %s on %s: %w", cfg.DBName, cfg.Addr, err)
	}
	if n > 0 {
		return nil
	}
	q := fmt.Sprintf("CREATE DATABASE IF NOT EXISTS `%s` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci", cfg.DBName)
	if _, err := db.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("create database %s on %s: %w", cfg.DBName, cfg.Addr, err)
	}
	return nil
}
