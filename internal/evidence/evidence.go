// Package evidence serves a project's audit chain and verifies it against
// the rows it covers (internal/audit says what an entry is and how it is
// checked; this package reads the pages).
package evidence

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// MaxPage is the most entries a page holds, and DefaultPage the number
// when the caller names none. Verification reads pages of verifyPage.
const (
	MaxPage     = 1000
	DefaultPage = 100
	verifyPage  = 1000
)

// Service reads and verifies audit chains.
type Service struct {
	store    *store.Store
	projects *project.Service
}

// NewService returns an evidence service.
func NewService(st *store.Store, projects *project.Service) *Service {
	return &Service{store: st, projects: projects}
}

// Page is a page of a chain with its head, as of one snapshot.
type Page struct {
	Entries  []audit.Entry
	HeadSeq  int64
	HeadHash []byte
}

// Entries is the page of proj's chain after seq after (admin).
func (s *Service) Entries(ctx context.Context, agent *auth.Agent, proj string, after int64, limit int) (Page, error) {
	if after < 0 {
		return Page{}, validation.One("after", "range", "after is a seq, at least 0")
	}
	if limit == 0 {
		limit = DefaultPage
	}
	if limit < 1 || limit > MaxPage {
		return Page{}, validation.One("limit", "range", "limit must be between 1 and %d", MaxPage)
	}
	var p Page
	err := s.store.Snapshot(ctx, func(tx *store.Tx) error {
		if err := s.projects.AuthorizeIn(ctx, tx.DB, agent, proj, auth.Admin); err != nil {
			return err
		}
		var err error
		if p.HeadSeq, p.HeadHash, err = tx.AuditHead(ctx, proj); err != nil {
			return err
		}
		p.Entries, err = tx.AuditEntries(ctx, proj, after, limit)
		return err
	})
	return p, err
}

// Result is a verification's answer: the entries checked and the head
// they lead to, or the first problem.
type Result struct {
	Entries int64
	Head    []byte
	Problem *audit.Problem
}

// Verify recomputes proj's chain from its entries and the rows they cover,
// in one snapshot, page by page: every entry's hashes and its body against
// its row as stored now, the head row against the last entry, every item
// version against an entry, and every item row's current version and
// liveness against the entries of its versions (admin).
func (s *Service) Verify(ctx context.Context, agent *auth.Agent, proj string) (Result, error) {
	var res Result
	err := s.store.Snapshot(ctx, func(tx *store.Tx) error {
		if err := s.projects.AuthorizeIn(ctx, tx.DB, agent, proj, auth.Admin); err != nil {
			return err
		}
		v := audit.NewVerifier()
		if err := verifyChain(ctx, tx, proj, v); err != nil {
			return err
		}
		if v.Problem() == nil {
			if err := verifyRows(ctx, tx, proj, v); err != nil {
				return err
			}
		}
		res = Result{Entries: v.Entries(), Head: v.Head(), Problem: v.Problem()}
		return nil
	})
	return res, err
}

func verifyChain(ctx context.Context, tx *store.Tx, proj string, v *audit.Verifier) error {
	headSeq, headHash, err := tx.AuditHead(ctx, proj)
	if err != nil {
		return err
	}
	for after := int64(0); ; {
		es, err := tx.AuditEntries(ctx, proj, after, verifyPage)
		if err != nil {
			return err
		}
		if len(es) == 0 {
			break
		}
		var keys []string
		var versions []int32
		for _, e := range es {
			if k, n, ok := splitSubject(e); ok {
				keys, versions = append(keys, k), append(versions, int32(n))
			}
		}
		bodies, err := tx.ItemVersionBodies(ctx, proj, keys, versions)
		if err != nil {
			return err
		}
		for _, e := range es {
			if e.Seq > headSeq {
				v.Extra(e.Seq, headSeq)
				return nil
			}
			if !v.Entry(e, bodies[e.Subject]) {
				return nil
			}
		}
		after = es[len(es)-1].Seq
	}
	v.AtHead(headSeq, headHash)
	return nil
}

// splitSubject is the key and version an item version entry covers.
func splitSubject(e audit.Entry) (string, int, bool) {
	if e.Kind != audit.KindItemVersion {
		return "", 0, false
	}
	i := strings.LastIndexByte(e.Subject, '@')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(e.Subject[i+1:])
	return e.Subject[:i], n, err == nil
}

func verifyRows(ctx context.Context, tx *store.Tx, proj string, v *audit.Verifier) error {
	for after := (store.VersionKey{}); ; {
		page, err := tx.ItemVersionKeys(ctx, proj, after.Key, after.Version, verifyPage)
		if err != nil {
			return err
		}
		for _, k := range page {
			if !v.Covered(k.Key, k.Version) {
				return nil
			}
		}
		if len(page) < verifyPage {
			break
		}
		after = page[len(page)-1]
	}
	seen := map[string]bool{}
	for after := ""; ; {
		page, err := tx.ItemStates(ctx, proj, after, verifyPage)
		if err != nil {
			return err
		}
		for _, it := range page {
			seen[it.Key] = true
			if !v.ItemState(it.Key, it.Current, it.Live) {
				return nil
			}
		}
		if len(page) < verifyPage {
			break
		}
		after = page[len(page)-1].Key
	}
	v.MissingItem(seen)
	return nil
}

// String is a result as the CLI prints it.
func (r Result) String() string {
	if r.Problem != nil {
		return fmt.Sprintf("bad seq=%d problem=%s: %s", r.Problem.Seq, r.Problem.Code, r.Problem.Detail)
	}
	return fmt.Sprintf("ok entries=%d head=%s", r.Entries, audit.HexHead(r.Head))
}
