// Package item stores context items as immutable versions. A write makes a
// new version only when something changed; concurrent writers of one key are
// serialised by a row lock on the item, so both succeed as versions n+1 and
// n+2. Deleting writes a tombstone version; history is never rewritten.
package item

import (
	"fmt"

	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/store"
)

// Errors of this package.
var (
	// ErrNotFound: no such item, no such version, a tombstone, or an item the
	// caller's role may not see (which must look the same).
	ErrNotFound = fmt.Errorf("item %w", fault.ErrNotFound)
)

// MaxBatch is the most items one batch may write.
const MaxBatch = 10000

// Status is what a write did to one item.
type Status string

// The outcomes of a write.
const (
	Created   Status = "created"   // the item had no live version (new, or after a tombstone)
	Updated   Status = "updated"   // a new version replaced a live one
	Unchanged Status = "unchanged" // nothing changed; no version was written
)

// Service reads and writes items.
type Service struct {
	store    *store.Store
	projects *project.Service
	groups   *writeGroups
}

// NewService returns an item service.
func NewService(st *store.Store, projects *project.Service) *Service {
	s := &Service{store: st, projects: projects}
	s.groups = newWriteGroups(s.runGroup, writeLanes)
	return s
}
