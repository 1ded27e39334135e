// Package db holds the SQL migrations, embedded into the binary.
package db

import "embed"

// Migrations are applied in order by `payreq migrate` and at `payreq serve` start.
//
//go:embed migrations/*.sql
var Migrations embed.FS
