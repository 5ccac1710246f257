package store

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// poolExec runs single statements on the pool, taking each connection
// with the store's acquire timeout (pgxpool alone would wait forever).
type poolExec struct{ s *Store }

func (p *poolExec) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	c, err := p.s.conn(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	defer c.Release()
	p.s.trips.Add(1)
	return c.Exec(ctx, sql, args...)
}

func (p *poolExec) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	c, err := p.s.conn(ctx)
	if err != nil {
		return nil, err
	}
	p.s.trips.Add(1)
	rows, err := c.Query(ctx, sql, args...)
	if err != nil {
		c.Release()
		return nil, err
	}
	return &releasingRows{Rows: rows, c: c}, nil
}

func (p *poolExec) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	c, err := p.s.conn(ctx)
	if err != nil {
		return errRow{err}
	}
	p.s.trips.Add(1)
	return &releasingRow{row: c.QueryRow(ctx, sql, args...), c: c}
}

func (p *poolExec) CopyFrom(ctx context.Context, table pgx.Identifier, cols []string, src pgx.CopyFromSource) (int64, error) {
	c, err := p.s.conn(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Release()
	p.s.trips.Add(2)
	return c.CopyFrom(ctx, table, cols, src)
}

// releasingRows gives the connection back when the rows are closed.
type releasingRows struct {
	pgx.Rows
	c *pgxpool.Conn
}

func (r *releasingRows) Close() {
	r.Rows.Close()
	if r.c != nil {
		r.c.Release()
		r.c = nil
	}
}

// releasingRow gives the connection back once the row is scanned.
type releasingRow struct {
	row pgx.Row
	c   *pgxpool.Conn
}

func (r *releasingRow) Scan(dest ...any) error {
	err := r.row.Scan(dest...)
	r.c.Release()
	return err
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }
