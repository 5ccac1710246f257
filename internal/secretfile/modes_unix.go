//go:build unix

package secretfile

// privateModes: a file's permission bits say who else may read it.
const privateModes = true
