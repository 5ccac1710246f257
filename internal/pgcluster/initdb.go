package pgcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// initdb creates pgdata unless it already holds a cluster. It initialises a
// scratch directory and renames it into place so that an interrupted initdb
// is simply redone on the next start.
func (c *Cluster) initdb(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(c.pgdata, "PG_VERSION")); err == nil {
		return c.checkVersion(ctx)
	}
	if entries, err := os.ReadDir(c.pgdata); err == nil && len(entries) > 0 {
		return fmt.Errorf("pgcluster: %s exists but is not a PostgreSQL data directory (no PG_VERSION); move it away", c.pgdata)
	}
	if err := c.loadPassword(true); err != nil {
		return err
	}
	scratch := c.pgdata + ".initdb"
	if err := os.RemoveAll(scratch); err != nil {
		return fmt.Errorf("pgcluster: remove leftover %s: %w", scratch, err)
	}
	if err := os.Mkdir(scratch, 0o700); err != nil {
		return fmt.Errorf("pgcluster: create %s: %w", scratch, err)
	}
	if c.asPostgres != nil {
		if err := os.Chown(scratch, c.uid, c.gid); err != nil {
			return fmt.Errorf("pgcluster: chown %s to %s: %w", scratch, superuser, err)
		}
	}
	c.logf("pgcluster: initialising a new PostgreSQL cluster in %s", c.pgdata)
	if err := c.runInitdb(ctx, scratch); err != nil {
		os.RemoveAll(scratch)
		return err
	}
	if err := os.Rename(scratch, c.pgdata); err != nil {
		return fmt.Errorf("pgcluster: move new cluster into place: %w", err)
	}
	return nil
}

// runInitdb initialises scratch with password authentication from the
// start, so the new cluster never trusts anyone. initdb reads the
// superuser's password from a file; it gets the SCRAM verifier rather
// than the password, and the file is removed right after.
func (c *Cluster) runInitdb(ctx context.Context, scratch string) error {
	verifier, err := scramVerifier(c.password)
	if err != nil {
		return err
	}
	pwfile := scratch + ".pw"
	if err := os.WriteFile(pwfile, []byte(verifier+"\n"), 0o600); err != nil {
		return fmt.Errorf("pgcluster: write initdb password file: %w", err)
	}
	defer os.Remove(pwfile)
	if c.asPostgres != nil {
		if err := os.Chown(pwfile, c.uid, c.gid); err != nil {
			return fmt.Errorf("pgcluster: chown %s to %s: %w", pwfile, superuser, err)
		}
	}
	out, err := c.run(ctx, "initdb", "-D", scratch, "-U", superuser, "--pwfile="+pwfile,
		"--auth-local=scram-sha-256", "--auth-host=scram-sha-256", "--encoding=UTF8", "--locale=C")
	if err != nil {
		return fmt.Errorf("pgcluster: initdb: %w: %s", err, out)
	}
	return nil
}

var pgVersionRE = regexp.MustCompile(`\(PostgreSQL\) ([0-9]+)`)

// checkVersion fails early, with a clear message, when pgdata was created by
// another major version than the binaries: the server would refuse to start
// and only say so in its log.
func (c *Cluster) checkVersion(ctx context.Context) error {
	b, err := os.ReadFile(filepath.Join(c.pgdata, "PG_VERSION"))
	if err != nil {
		return fmt.Errorf("pgcluster: read PG_VERSION: %w", err)
	}
	dataVersion := strings.TrimSpace(string(b))
	out, err := c.run(ctx, "pg_ctl", "--version")
	m := pgVersionRE.FindStringSubmatch(out)
	if err != nil || m == nil {
		return nil // unknown binary version: let the server decide
	}
	if m[1] != dataVersion {
		return fmt.Errorf("pgcluster: %s was created by PostgreSQL %s but the binaries in %s are PostgreSQL %s: "+
			"point BinDir at PostgreSQL %s binaries, or upgrade the cluster with pg_upgrade",
			c.pgdata, dataVersion, c.binDir, m[1], dataVersion)
	}
	return nil
}
