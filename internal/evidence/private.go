package evidence

import (
	"fmt"
	"io"
	"io/fs"
	"os"
)

// readPrivate reads a secret file that only its owner may open. Whoever
// can read the audit key can sign checkpoints and forge the HMAC of stored
// answers, so a key left open to group or others is refused at start,
// with the command that fixes it, rather than used. The mode is taken from
// the open file, so the file checked is the file read.
func readPrivate(what, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if err := checkPrivate(what, path, fi.Mode()); err != nil {
		return nil, err
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return b, nil
}

// CheckPrivateFile refuses a file holding a secret (what names it) whose
// mode grants group or others anything: for a secret that is read
// elsewhere, such as an audit key in the config file.
func CheckPrivateFile(what, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return checkPrivate(what, path, fi.Mode())
}

// checkPrivate is the rule: no permission bit for group or others, on
// systems where the mode means that (privateModes).
func checkPrivate(what, path string, mode fs.FileMode) error {
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
