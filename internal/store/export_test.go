package store

import (
	"context"
	"fmt"
)

// RaiseForTest makes the server raise an error with SQLSTATE code in tx.
func RaiseForTest(ctx context.Context, tx *Tx, code string) error {
	_, err := tx.ex.Exec(ctx, fmt.Sprintf("DO $$ BEGIN RAISE EXCEPTION 'test' USING ERRCODE = '%s'; END $$", code))
	return interpret(err)
}

// TerminateForTest makes the server end tx's connection.
func TerminateForTest(ctx context.Context, tx *Tx) error {
	_, err := tx.ex.Exec(ctx, "SELECT pg_terminate_backend(pg_backend_pid())")
	return interpret(err)
}
