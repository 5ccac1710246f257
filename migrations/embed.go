// Package migrations holds contextd's goose SQL migrations, embedded in the
// binary so that a server can bring its own schema up to date on start. sqlc
// reads the same files as its schema, so the schema is written once.
package migrations

import "embed"

// FS is the directory of *.sql migrations, in goose's numbered order.
//
//go:embed *.sql
var FS embed.FS
