//go:build !unix

package secretfile

// privateModes: off Unix the permission bits Go reports do not say who
// may read a file (Windows has ACLs), so secret files are not checked.
const privateModes = false
