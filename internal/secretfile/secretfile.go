// Package secretfile reads files that hold a secret (the audit key, the
// embedded cluster's password) and refuses one that group or others may
// open: whoever can read the audit key can seal entries and sign
// checkpoints, whoever can read the cluster's password is its superuser.
// The refusal says how to fix it. Off Unix the permission bits Go reports
// do not say who may read a file (Windows has ACLs), so nothing is checked
// there.
package secretfile

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Read reads the secret file at path (what names it in errors), checking
// the mode of the file it opened, so the file checked is the file read. A
// missing file's error wraps fs.ErrNotExist.
func Read(what, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := Check(what, path, fi.Mode()); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return b, nil
}

// CheckPath refuses the file at path if it is open to group or others:
// for a secret read elsewhere, such as an audit key in the config file.
func CheckPath(what, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return Check(what, path, fi.Mode())
}

// Check is the rule: no permission bit for group or others, where the
// mode means that (privateModes).
func Check(what, path string, mode fs.FileMode) error {
	perm := mode.Perm()
	if !privateModes || perm&0o077 == 0 {
		return nil
	}
	how := "open to group or others"
	if perm&0o044 != 0 {
		how = "readable by group or others"
	}
	return fmt.Errorf("%s %s is %s (mode %#o): run chmod 600 %s", what, path, how, perm, path)
}
