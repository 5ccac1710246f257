//go:build unix

package pgcluster

import (
	"io/fs"
	"syscall"
)

type owner struct{ uid, gid int }

// statOwner returns the owner of a file, which traversalHint needs to tell
// which permission bits apply to the postgres user.
func statOwner(fi fs.FileInfo) (owner, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return owner{}, false
	}
	return owner{uid: int(st.Uid), gid: int(st.Gid)}, true
}
