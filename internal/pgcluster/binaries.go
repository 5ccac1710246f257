package pgcluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// ErrBinariesNotFound is returned (wrapped) by FindBinaries and Start when no
// initdb/pg_ctl can be found, so callers can fall back to another source of
// a database and tell the user what to install.
var ErrBinariesNotFound = errors.New("PostgreSQL server binaries (initdb, pg_ctl) not found")

// searchDirs returns the fixed install locations FindBinaries tries after
// PATH: Linux packages, a source install, then Homebrew, newest version
// first within each, so a machine with several versions consistently gets
// the newest one.
func searchDirs() []string {
	newestFirst := func(pattern string) []string {
		matches, _ := filepath.Glob(pattern)
		sort.SliceStable(matches, func(i, j int) bool {
			return versionLess(dirVersion(matches[j]), dirVersion(matches[i]))
		})
		return matches
	}
	dirs := newestFirst("/usr/lib/postgresql/*/bin")
	dirs = append(dirs, "/usr/local/pgsql/bin")
	return append(dirs, newestFirst("/opt/homebrew/opt/postgresql*/bin")...)
}

var versionRE = regexp.MustCompile(`[0-9]+(\.[0-9]+)*`)

// dirVersion extracts the version from a path such as
// /usr/lib/postgresql/15/bin or /opt/homebrew/opt/postgresql@16/bin.
func dirVersion(binDir string) []int {
	m := versionRE.FindString(filepath.Base(filepath.Dir(binDir)))
	var v []int
	for _, part := range strings.Split(m, ".") {
		if n, err := strconv.Atoi(part); err == nil {
			v = append(v, n)
		}
	}
	return v
}

func versionLess(a, b []int) bool {
	for i := 0; i < len(a) && i < len(b); i++ {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return len(a) < len(b)
}

// hasBinaries reports whether dir holds both initdb and pg_ctl.
func hasBinaries(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// FindBinaries returns the directory holding initdb and pg_ctl: binDir if
// given, else the first of PATH, the newest /usr/lib/postgresql/*/bin,
// /usr/local/pgsql/bin and the newest /opt/homebrew/opt/postgresql*/bin. Both
// binaries must come from one directory, because pg_ctl and initdb locate the
// matching postgres executable next to themselves. The error says what to
// install, since a missing server package is the usual cause.
func FindBinaries(binDir string) (string, error) {
	if binDir != "" {
		if hasBinaries(binDir) {
			return binDir, nil
		}
		return "", fmt.Errorf("%w in %s: point BinDir at the bin directory of a PostgreSQL server installation", ErrBinariesNotFound, binDir)
	}
	var candidates []string
	if p, err := exec.LookPath("initdb"); err == nil {
		// Prefer the real location behind a symlink such as
		// /usr/local/bin/initdb -> /usr/lib/postgresql/15/bin/initdb.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(real))
		}
		candidates = append(candidates, filepath.Dir(p))
	}
	candidates = append(candidates, searchDirs()...)
	for _, dir := range candidates {
		if hasBinaries(dir) {
			if abs, err := filepath.Abs(dir); err == nil {
				dir = abs
			}
			return dir, nil
		}
	}
	return "", fmt.Errorf("%w on PATH or in /usr/lib/postgresql/*/bin, /usr/local/pgsql/bin, /opt/homebrew/opt/postgresql*/bin: "+
		"install them (Debian/Ubuntu: apt-get install postgresql; Fedora: dnf install postgresql-server; macOS: brew install postgresql@16), "+
		"or set DATABASE_URL to an existing database", ErrBinariesNotFound)
}
