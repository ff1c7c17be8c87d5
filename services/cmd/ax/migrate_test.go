package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/axsched/ax/services/internal/testenv"
)

func TestMigrateDownCommand(t *testing.T) {
	dsn := testenv.MigratedDSN(t) // at the latest version, as a user who may change it

	_, err := runAx(t, "migrate", "down", "--mysql-dsn", dsn)
	require.ErrorContains(t, err, "--to is required")
	_, err = runAx(t, "migrate", "down", "--to", "-1", "--mysql-dsn", dsn)
	require.ErrorContains(t, err, "a version is 0 or more")
	_, err = runAx(t, "migrate", "down", "--to", "999", "--mysql-dsn", dsn)
	require.ErrorContains(t, err, "above the applied version")
	out, err := runAx(t, "migrate", "status", "--mysql-dsn", dsn)
	require.NoError(t, err)
	require.Contains(t, out, "up to date", "refused commands change nothing")

	out, err = runAx(t, "migrate", "down", "--to", "7", "--mysql-dsn", dsn)
	require.NoError(t, err)
	require.Contains(t, out, "schema at version 7 ")
	out, err = runAx(t, "migrate", "status", "--mysql-dsn", dsn)
	require.NoError(t, err)
	require.Contains(t, out, "applied: 7\n")
	require.Contains(t, out, "pending")

	out, err = runAx(t, "migrate", "up", "--mysql-dsn", dsn)
	require.NoError(t, err)
	require.Contains(t, out, "schema at version")
	out, err = runAx(t, "migrate", "status", "--mysql-dsn", dsn)
	require.NoError(t, err)
	require.Contains(t, out, "up to date")
}
