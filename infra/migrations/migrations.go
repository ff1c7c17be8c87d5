// Package migrations embeds ax's numbered MySQL migrations so that the one
// binary can apply them anywhere (`ax migrate up`) without shipping files.
package migrations

import "embed"

// FS holds NNNN_name.up.sql / NNNN_name.down.sql pairs, applied in order by
// golang-migrate.
//
//go:embed *.sql
var FS embed.FS
