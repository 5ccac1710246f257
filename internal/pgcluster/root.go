package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// setupRoot arranges for initdb, pg_ctl and the server to run as the
// postgres user, since all three refuse to run as root.
func (c *Cluster) setupRoot() error {
	u, err := user.Lookup(superuser)
	if err != nil {
		return fmt.Errorf("pgcluster: running as root, but PostgreSQL refuses to run as root and there is no %q user to run it as: %w", superuser, err)
	}
	if c.uid, err = strconv.Atoi(u.Uid); err != nil {
		return fmt.Errorf("pgcluster: uid of %s: %w", superuser, err)
	}
	if c.gid, err = strconv.Atoi(u.Gid); err != nil {
		return fmt.Errorf("pgcluster: gid of %s: %w", superuser, err)
	}
	if p, err := exec.LookPath("runuser"); err == nil {
		c.asPostgres = []string{p, "-u", superuser, "--"}
		return nil
	}
	if p, err := exec.LookPath("su"); err == nil {
		// su takes one shell command; command() quotes the arguments.
		c.asPostgres = []string{p, superuser, "-s", "/bin/sh", "-c"}
		return nil
	}
	return errors.New("pgcluster: running as root, but neither runuser nor su is available to run PostgreSQL as the postgres user")
}

// prepareDirs creates DataDir and the socket directory and, as root, hands
// the server's files to the postgres user. DataDir itself stays owned by
// the caller (contextd may keep other files there); it only needs to be
// traversable, so it is created 0755. The socket directory is 0700, also
// when an earlier version made it 0755, so that other users cannot even
// reach the socket.
func (c *Cluster) prepareDirs(ctx context.Context) error {
	if err := os.MkdirAll(c.root, 0o755); err != nil {
		return fmt.Errorf("pgcluster: create data dir: %w", err)
	}
	if err := os.MkdirAll(c.sockDir, 0o700); err != nil {
		return fmt.Errorf("pgcluster: create socket dir: %w", err)
	}
	if err := os.Chmod(c.sockDir, 0o700); err != nil {
		return fmt.Errorf("pgcluster: restrict socket dir: %w", err)
	}
	// pg_ctl opens the log as the server user, which may not be able to
	// create files in DataDir, so create it here.
	f, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("pgcluster: create log: %w", err)
	}
	f.Close()
	if c.asPostgres == nil {
		return nil
	}
	for _, p := range []string{c.sockDir, c.logPath} {
		if err := os.Chown(p, c.uid, c.gid); err != nil {
			return fmt.Errorf("pgcluster: chown %s to %s: %w", p, superuser, err)
		}
	}
	// Probe the exact permission question (ACLs and groups included)
	// instead of guessing from mode bits.
	if err := c.command(ctx, "", "/bin/sh", "-c", `test -x "$1" && test -w "$2"`, "sh", c.root, c.sockDir).Run(); err != nil {
		return fmt.Errorf("pgcluster: the %s user cannot reach %s (the server runs as %s when contextd runs as root): %s",
			superuser, c.root, superuser, traversalHint(c.root, c.uid, c.gid))
	}
	return nil
}

// traversalHint names the first directory on the way to dir that the given
// user probably cannot search, judging by mode bits.
func traversalHint(dir string, uid, gid int) string {
	var chain []string
	for d := dir; ; d = filepath.Dir(d) {
		chain = append([]string{d}, chain...)
		if d == filepath.Dir(d) {
			break
		}
	}
	for _, d := range chain {
		fi, err := os.Stat(d)
		if err != nil {
			continue
		}
		mode := fi.Mode().Perm()
		ok := mode&0o001 != 0
		if st, isUnix := statOwner(fi); isUnix {
			switch {
			case st.uid == uid:
				ok = mode&0o100 != 0
			case st.gid == gid:
				ok = mode&0o010 != 0
			}
		}
		if !ok {
			return fmt.Sprintf("make every parent directory traversable, e.g. chmod o+x %s", d)
		}
	}
	return "make every parent directory of the data dir traversable (chmod o+x)"
}

// command builds a command for one of the cluster's binaries (or, with an
// empty name, the program in args[0]), run as the postgres user when we are
// root. The working directory is DataDir because the postgres user may be
// unable to read the caller's (e.g. /root), which initdb complains about.
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	if name != "" {
		args = append([]string{filepath.Join(c.binDir, name)}, args...)
	}
	switch {
	case c.asPostgres == nil:
	case filepath.Base(c.asPostgres[0]) == "su":
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = shellQuote(a)
		}
		args = append(append([]string{}, c.asPostgres...), strings.Join(quoted, " "))
	default:
		args = append(append([]string{}, c.asPostgres...), args...)
	}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = c.root
	return cmd
}

// run runs a binary and returns its combined output, which for initdb and
// pg_ctl carries the reason of any failure.
func (c *Cluster) run(ctx context.Context, name string, args ...string) (string, error) {
	out, err := c.command(ctx, name, args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
