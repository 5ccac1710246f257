//go:build !unix

package pgcluster

import "io/fs"

type owner struct{ uid, gid int }

// statOwner has no owner to report off Unix, where the root/postgres
// dance does not apply anyway.
func statOwner(fs.FileInfo) (owner, bool) { return owner{}, false }
