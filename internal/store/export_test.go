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

// ExecForTest runs sql in tx as the store's statements run (waiting in a
// pipeline when tx is in one).
func ExecForTest(ctx context.Context, tx *Tx, sql string) error {
	_, err := tx.ex.Exec(ctx, sql)
	return interpret(err)
}

// AtCommitForTest queues sql for tx's COMMIT.
func AtCommitForTest(ctx context.Context, tx *Tx, sql string) error {
	_, err := atCommitExec{tx.tc}.Exec(ctx, sql)
	return err
}

// QueryTextForTest runs a one-value query in tx.
func QueryTextForTest(ctx context.Context, tx *Tx, sql string) (string, error) {
	var s string
	err := tx.ex.QueryRow(ctx, sql).Scan(&s)
	return s, interpret(err)
}

// PipelineUnreadForTest is Tx.pipelineUnread.
func PipelineUnreadForTest(ctx context.Context, tx *Tx, fn func() error) error {
	return tx.pipelineUnread(ctx, fn)
}

// TableCountsForTest runs a query of (name, n, m) rows in tx.
func TableCountsForTest(ctx context.Context, tx *Tx, sql string) (map[string][2]int64, error) {
	rows, err := tx.ex.Query(ctx, sql)
	if err != nil {
		return nil, interpret(err)
	}
	defer rows.Close()
	out := map[string][2]int64{}
	for rows.Next() {
		var name string
		var n, m int64
		if err := rows.Scan(&name, &n, &m); err != nil {
			return nil, err
		}
		out[name] = [2]int64{n, m}
	}
	return out, interpret(rows.Err())
}

// BulkAppendMin is the fewest entries a transaction appends by COPY.
const BulkAppendMin = bulkAppendMin

// EntryForTest adds an audit entry to tx, appended with its COMMIT.
func EntryForTest(tx *Tx, chain, kind, subject string, body []byte) error {
	return tx.entry(chain, kind, subject, body, nil)
}

// PoolSize is poolSize for tests.
func PoolSize(cfg Config) int32 { return poolSize(cfg) }

// DBQueryTextForTest is QueryTextForTest through a DB (a read of Tx.Reads).
func DBQueryTextForTest(ctx context.Context, db DB, sql string) (string, error) {
	var s string
	err := db.ex.QueryRow(ctx, sql).Scan(&s)
	return s, err
}

// DBTwoStatementsForTest sends two statements through db.
func DBTwoStatementsForTest(ctx context.Context, db DB) error {
	if _, err := db.ex.Exec(ctx, "SELECT 1"); err != nil {
		return err
	}
	_, err := db.ex.Exec(ctx, "SELECT 2")
	return err
}

// RecordEnd is recordEnd, for its test.
var RecordEnd = recordEnd
