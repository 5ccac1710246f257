package store

// The embedded goose migrations. Every runner holds goose's Postgres session
// lock, so two servers starting at once on one database do not race each
// other through the schema.

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"io/fs"
	"sort"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/contextd/contextd/migrations"
)

// MigrationStatus is one migration and whether it has been applied.
type MigrationStatus struct {
	Version int64
	Name    string
	Applied bool
}

func provider(databaseURL string) (*goose.Provider, *sql.DB, error) {
	db, err := sql.Open("pgx", databaseURL)
	if err != nil {
		return nil, nil, fmt.Errorf("open database: %w", err)
	}
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("session locker: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS,
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
	)
	if err != nil {
		db.Close()
		return nil, nil, fmt.Errorf("migration provider: %w", err)
	}
	return p, db, nil
}

// register makes sure the pgx database/sql driver is linked in.
var _ = stdlib.GetDefaultDriver

// MigrateUp applies every pending migration.
func MigrateUp(ctx context.Context, databaseURL string) error {
	p, db, err := provider(databaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := refuseNewer(ctx, p); err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("migrate up: %w", err)
	}
	return backfill(ctx, databaseURL)
}

// backfill gives data older than the audit chain its entries (see
// Store.BackfillAudit), before any server of the new schema serves.
func backfill(ctx context.Context, databaseURL string) error {
	pool, err := pgxpool.New(ctx, databaseURL)
	if err != nil {
		return fmt.Errorf("backfill the audit chains: %w", err)
	}
	defer pool.Close()
	_, err = New(pool, 0).BackfillAudit(ctx)
	return err
}

// refuseNewer refuses a database whose schema is newer than this binary's
// migrations: the item write path keeps derived rows (rank columns,
// counters, the relevance index) that a newer schema may define
// differently, so an older server writing there would corrupt them.
func refuseNewer(ctx context.Context, p *goose.Provider) error {
	current, err := p.GetDBVersion(ctx)
	if err != nil {
		return fmt.Errorf("schema version: %w", err)
	}
	var newest int64
	for _, src := range p.ListSources() {
		newest = max(newest, src.Version)
	}
	if current > newest {
		return fmt.Errorf("the database's schema is at version %d, newer than this contextd's %d: run a contextd at least as new", current, newest)
	}
	return nil
}

// MigrateDown rolls back the most recent migration.
func MigrateDown(ctx context.Context, databaseURL string) error {
	p, db, err := provider(databaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := p.Down(ctx); err != nil {
		return fmt.Errorf("migrate down: %w", err)
	}
	return nil
}

// Migrations reports every known migration and whether it is applied.
func Migrations(ctx context.Context, databaseURL string) ([]MigrationStatus, error) {
	p, db, err := provider(databaseURL)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	st, err := p.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate status: %w", err)
	}
	out := make([]MigrationStatus, 0, len(st))
	for _, s := range st {
		out = append(out, MigrationStatus{Version: s.Source.Version, Name: s.Source.Path, Applied: s.State == goose.StateApplied})
	}
	return out, nil
}

// MigrationsPending reports whether the database lacks any embedded migration. A
// server started with --migrate=false refuses to run on a stale schema.
func MigrationsPending(ctx context.Context, databaseURL string) (bool, error) {
	p, db, err := provider(databaseURL)
	if err != nil {
		return false, err
	}
	defer db.Close()
	if err := refuseNewer(ctx, p); err != nil {
		return false, err
	}
	pending, err := p.HasPending(ctx)
	if err != nil {
		return false, fmt.Errorf("check pending migrations: %w", err)
	}
	return pending, nil
}

var hashOnce = sync.OnceValue(func() string {
	names, err := fs.Glob(migrations.FS, "*.sql")
	if err != nil {
		panic(err)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		b, err := fs.ReadFile(migrations.FS, n)
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
})

// MigrationsHash identifies the embedded migrations' exact content. The test harness
// names its template database by it, so a changed migration gets a fresh
// template instead of a stale one.
func MigrationsHash() string { return hashOnce() }

// FreshDatabase reports whether no migration has been applied to the
// database yet: asked before migrating, it says whether this process is
// the one that makes the schema, and with it the only entries written
// without a seal (the backfill's, of the _shared project), which it may
// then adopt (AdoptChains). Any other state of the database is one a
// database writer could have arranged, so nothing adopts it on its own.
func FreshDatabase(ctx context.Context, databaseURL string) (bool, error) {
	st, err := Migrations(ctx, databaseURL)
	if err != nil {
		return false, err
	}
	for _, s := range st {
		if s.Applied {
			return false, nil
		}
	}
	return true, nil
}
