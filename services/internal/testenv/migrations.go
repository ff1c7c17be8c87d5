package testenv

import (
	"testing"

	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/infra/migrations"
)

// MigrationVersions are the versions of the embedded migrations, oldest
// first.
func MigrationVersions(t testing.TB) []uint {
	t.Helper()
	src, err := iofs.New(migrations.FS, ".")
	require.NoError(t, err)
	defer src.Close()
	var out []uint
	v, err := src.First()
	for err == nil {
		out = append(out, v)
		v, err = src.Next(v)
	}
	require.NotEmpty(t, out)
	return out
}

// PreviousSchemaVersion is the migration before the newest: a schema one
// step older than this build needs. Numbers are assigned ahead of merging,
// so it need not be the newest minus one.
func PreviousSchemaVersion(t testing.TB) uint {
	t.Helper()
	v := MigrationVersions(t)
	require.Greater(t, len(v), 1)
	return v[len(v)-2]
}
