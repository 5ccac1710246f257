package pgcluster

// Password authentication. The cluster's superuser can insert an admin
// agent, so a cluster that anyone on the machine can log in to is a
// contextd that anyone on the machine can administer: every login, on TCP
// and on the unix socket, must give its role's password (SCRAM-SHA-256).
// contextd generates the passwords, and keeps the superuser's in the data
// directory (mode 0600); the logins it makes for itself get passwords
// derived from it, so there is one secret to keep and to back up.

import (
	"context"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/contextd/contextd/internal/secretfile"
)

// PasswordFile is the name, in the data directory, of the file holding the
// superuser's password. It is in libpq's pgpass format, so that an operator
// can run `PGPASSFILE=DataDir/pgpass psql -h 127.0.0.1 -p PORT -U postgres`.
const PasswordFile = "pgpass"

// scramIterations is PostgreSQL's default scram_iterations. The passwords
// are random, so more iterations would add cost and no strength.
const scramIterations = 4096

// hbaConf replaces the pg_hba.conf of a cluster made by an earlier version
// of contextd, which trusted every local login. It is what initdb writes for
// --auth-local=scram-sha-256 --auth-host=scram-sha-256.
const hbaConf = `# Written by contextd: every login, on the unix socket or on TCP, needs the
# role's password (SCRAM-SHA-256). The superuser's is in ../` + PasswordFile + `.
# TYPE  DATABASE     USER  ADDRESS       METHOD
local   all          all                 scram-sha-256
host    all          all   127.0.0.1/32  scram-sha-256
host    all          all   ::1/128       scram-sha-256
local   replication  all                 scram-sha-256
host    replication  all   127.0.0.1/32  scram-sha-256
host    replication  all   ::1/128       scram-sha-256
`

func (c *Cluster) passwordPath() string { return filepath.Join(c.root, PasswordFile) }

// loadPassword reads the superuser's password into c.password. A missing
// file gets a new random password only when mayCreate says the cluster has
// none to match yet (a new cluster, or one still on trust authentication,
// which Start upgrades); otherwise the password is lost, and guessing a
// new one would only fail later with a vaguer message.
func (c *Cluster) loadPassword(mayCreate bool) error {
	if c.password != "" {
		return nil
	}
	path := c.passwordPath()
	pw, err := readPasswordFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && mayCreate:
		if pw, err = createPasswordFile(path); err != nil {
			return err
		}
		c.logf("pgcluster: made a password for the %s role of the cluster; it is in %s (mode 0600, libpq's pgpass format)", superuser, path)
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("pgcluster: %s is missing, and the cluster in %s accepts only password logins: restore the file; %s",
			path, c.pgdata, c.newPasswordHint())
	case err != nil:
		return err
	}
	c.password = pw
	return nil
}

// readPasswordFile returns the superuser's password from a pgpass file,
// refusing a file that other users may read: they could log in as the
// superuser with it and make themselves an admin agent.
func readPasswordFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err // fs.ErrNotExist stays visible to loadPassword
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("pgcluster: password file: %w", err)
	}
	if err := secretfile.Check("pgcluster: the database superuser's password file", path, fi.Mode()); err != nil {
		return "", fmt.Errorf("%w (and, if someone may have read it, make a new password as for a lost file)", err)
	}
	b, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return "", fmt.Errorf("pgcluster: read %s: %w", path, err)
	}
	pw, ok := pgpassLookup(string(b), superuser)
	if !ok {
		return "", fmt.Errorf("pgcluster: %s has no password for %s (a line *:*:*:%s:PASSWORD)", path, superuser, superuser)
	}
	return pw, nil
}

// createPasswordFile writes a new random password to path, unless another
// start made the file first: then both use that one.
func createPasswordFile(path string) (string, error) {
	// base32: nothing to escape in pgpass or in a URL.
	pw := rand.Text()
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+PasswordFile+"-*") // mode 0600
	if err != nil {
		return "", fmt.Errorf("pgcluster: create password file: %w", err)
	}
	defer os.Remove(tmp.Name())
	content := "# The embedded PostgreSQL cluster's superuser password, made by contextd.\n" +
		"# libpq's pgpass format: PGPASSFILE=" + path + " psql -h 127.0.0.1 -p PORT -U " + superuser + "\n" +
		"*:*:*:" + superuser + ":" + pw + "\n"
	_, err = tmp.WriteString(content)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("pgcluster: write password file: %w", err)
	}
	// Link, unlike Rename, fails when path exists, so a concurrent start
	// never replaces a password that is already in use.
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return readPasswordFile(path)
	} else if err != nil {
		return "", fmt.Errorf("pgcluster: create password file: %w", err)
	}
	return pw, nil
}

// pgpassLookup returns the password of the first line for user (or for
// any user, "*") in pgpass content; host, port and database are ignored,
// since the file only serves this cluster.
func pgpassLookup(content, user string) (string, bool) {
	for _, line := range strings.Split(content, "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := splitPgpass(line)
		if len(f) == 5 && (f[3] == user || f[3] == "*") && f[4] != "" {
			return f[4], true
		}
	}
	return "", false
}

// splitPgpass splits a pgpass line into its fields, undoing the backslash
// escapes of ':' and '\'. The password, last, may hold unescaped colons.
func splitPgpass(line string) []string {
	var fields []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		switch ch := line[i]; {
		case ch == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case ch == ':' && len(fields) < 4:
			fields = append(fields, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(ch)
		}
	}
	return append(fields, cur.String())
}

// scramVerifier returns what PostgreSQL stores for password with
// SCRAM-SHA-256 (RFC 5802, RFC 7677). contextd sends the verifier, never the
// password, so the password cannot reach the server's log or the output
// of initdb and single-user mode.
func scramVerifier(password string) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("pgcluster: salt: %w", err)
	}
	salted, err := pbkdf2.Key(sha256.New, password, salt, scramIterations, sha256.Size)
	if err != nil {
		return "", fmt.Errorf("pgcluster: scram: %w", err)
	}
	mac := func(msg string) []byte {
		h := hmac.New(sha256.New, salted)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	stored := sha256.Sum256(mac("Client Key"))
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", scramIterations, b64(salt), b64(stored[:]), b64(mac("Server Key"))), nil
}

// setPasswordSQL is the statement that gives role password, as a verifier.
func setPasswordSQL(role, password string) (string, error) {
	v, err := scramVerifier(password)
	if err != nil {
		return "", err
	}
	return "ALTER ROLE " + pgx.Identifier{role}.Sanitize() + " PASSWORD '" + strings.ReplaceAll(v, "'", "''") + "'", nil
}

// loginPassword derives the password of one of contextd's own logins from
// the superuser's, so that every process on the data directory agrees on
// it without a second secret on disk.
func (c *Cluster) loginPassword(login string) (string, error) {
	k, err := hkdf.Key(sha256.New, []byte(c.password), nil, "contextd pgcluster login "+login, 20)
	if err != nil {
		return "", fmt.Errorf("pgcluster: derive the password of %s: %w", login, err)
	}
	return base64.RawURLEncoding.EncodeToString(k), nil
}

// LoginURL gives login, an existing role, its password (derived from the
// superuser's, the same on every call) and returns the URL for database
// dbname that logs in as it. A role made without a password, as a server
// login made by an earlier version of contextd was, gets one here.
func (c *Cluster) LoginURL(ctx context.Context, login, dbname string) (string, error) {
	pw, err := c.loginPassword(login)
	if err != nil {
		return "", err
	}
	stmt, err := setPasswordSQL(login, pw)
	if err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return "", fmt.Errorf("pgcluster: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return "", fmt.Errorf("pgcluster: set the password of %s: %w", login, err)
	}
	return c.url(login, pw, dbname), nil
}

// hbaTrusts reports whether pg_hba.conf lets any login in without a
// password, as it did in a cluster made by an earlier version of contextd
// (initdb --auth=trust).
func (c *Cluster) hbaTrusts() (bool, error) {
	b, err := os.ReadFile(filepath.Join(c.pgdata, "pg_hba.conf"))
	if err != nil {
		return false, fmt.Errorf("pgcluster: read pg_hba.conf: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		if f := strings.Fields(line); len(f) > 3 && slices.Contains(f[3:], "trust") {
			return true, nil
		}
	}
	return false, nil
}

// writeHBA replaces pg_hba.conf with hbaConf, atomically, so that a crash
// leaves either the old rules (and the next start upgrades again) or ours.
func (c *Cluster) writeHBA() error {
	path := filepath.Join(c.pgdata, "pg_hba.conf")
	tmp := path + ".contextd"
	if err := os.WriteFile(tmp, []byte(hbaConf), 0o600); err != nil {
		return fmt.Errorf("pgcluster: write pg_hba.conf: %w", err)
	}
	if c.asPostgres != nil {
		if err := os.Chown(tmp, c.uid, c.gid); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("pgcluster: chown pg_hba.conf to %s: %w", superuser, err)
		}
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("pgcluster: write pg_hba.conf: %w", err)
	}
	return nil
}

// upgradeStopped moves a stopped cluster from trust to password
// authentication: it sets the superuser's password in single-user mode,
// which takes no connections, so the old rules are never in force on a
// listening server, and then rewrites pg_hba.conf.
func (c *Cluster) upgradeStopped(ctx context.Context) error {
	c.logf("pgcluster: the cluster in %s lets every local user in without a password (made by an earlier contextd): "+
		"setting a password for %s and requiring passwords", c.pgdata, superuser)
	stmt, err := setPasswordSQL(superuser, c.password)
	if err != nil {
		return err
	}
	cmd := c.command(ctx, "postgres", "--single", "-D", c.pgdata, "postgres")
	cmd.Stdin = strings.NewReader(stmt + "\n")
	out, err := cmd.CombinedOutput()
	// Single-user mode reports a failed statement on its output and still
	// exits 0 at the end of its input.
	if err != nil || strings.Contains(string(out), "ERROR:") || strings.Contains(string(out), "FATAL:") {
		return fmt.Errorf("pgcluster: set the password of %s in single-user mode: %v: %s", superuser, err, strings.TrimSpace(string(out)))
	}
	return c.writeHBA()
}

// secureRunning checks the authentication of a server Start found running.
// One made by an earlier version still trusts every local login: it gets
// the password and the new pg_hba.conf while trust lets this connection
// in. The reload is unconditional: a start that crashed between writing
// pg_hba.conf and reloading left a server that still trusts.
func (c *Cluster) secureRunning(ctx context.Context, trusts bool) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgcluster: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if trusts {
		c.logf("pgcluster: the server running in %s lets every local user in without a password (made by an earlier contextd): "+
			"setting a password for %s and requiring passwords", c.pgdata, superuser)
		stmt, err := setPasswordSQL(superuser, c.password)
		if err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("pgcluster: set the password of %s: %w", superuser, err)
		}
		if err := c.writeHBA(); err != nil {
			return err
		}
	}
	if _, err := conn.Exec(ctx, "SELECT pg_reload_conf()"); err != nil {
		return fmt.Errorf("pgcluster: reload the server's configuration: %w", err)
	}
	if trusts {
		return c.waitPasswordRequired(ctx)
	}
	return nil
}

// waitPasswordRequired returns once the server refuses a login without a
// password: pg_reload_conf only signals the postmaster, and Start must not
// return while the old rules still apply.
func (c *Cluster) waitPasswordRequired(ctx context.Context) error {
	cfg, err := pgx.ParseConfig(c.url(superuser, "", "postgres"))
	if err != nil {
		return err
	}
	cfg.Password = "" // not PGPASSWORD or a ~/.pgpass either
	cfg.ConnectTimeout = 2 * time.Second
	deadline := time.Now().Add(10 * time.Second)
	for {
		conn, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			if isAuthError(err) {
				return nil
			}
			return fmt.Errorf("pgcluster: check that the server requires passwords: %w", err)
		}
		conn.Close(context.WithoutCancel(ctx))
		if time.Now().After(deadline) {
			return fmt.Errorf("pgcluster: the server in %s still lets %s in without a password after reloading pg_hba.conf; restart it: pg_ctl restart -D %s", c.pgdata, superuser, c.pgdata)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// isAuthError reports whether err is the server refusing a login (a wrong
// or missing password, or no pg_hba.conf rule), which no retry will cure.
func isAuthError(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "28P01" || pgErr.Code == "28000")
}

// authError explains a login the server refused with the password file's
// password: the file and the cluster disagree.
func (c *Cluster) authError(err error) error {
	return fmt.Errorf("pgcluster: the server in %s refuses the %s password in %s: restore the file that goes with this cluster; %s: %w",
		c.pgdata, superuser, c.passwordPath(), c.newPasswordHint(), err)
}

// newPasswordHint says how to get a new superuser password when the old
// one is lost: Start converts a cluster that trusts as it converts one of
// an earlier version.
func (c *Cluster) newPasswordHint() string {
	return fmt.Sprintf("or, to make a new password, stop the server (pg_ctl stop -D %s), change every method in %s to trust, and start again",
		c.pgdata, filepath.Join(c.pgdata, "pg_hba.conf"))
}
