package store

import "context"

// MigrateUpToForTest applies the embedded migrations up to version, without
// MigrateUp's audit backfill: a database at an older schema, for tests of
// one migration.
func MigrateUpToForTest(ctx context.Context, databaseURL string, version int64) error {
	p, db, err := provider(databaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = p.UpTo(ctx, version)
	return err
}

// MigrateDownToForTest rolls the migrations after version back, newest
// first.
func MigrateDownToForTest(ctx context.Context, databaseURL string, version int64) error {
	p, db, err := provider(databaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	_, err = p.DownTo(ctx, version)
	return err
}
