// Package evidence serves a project's audit chain and verifies it against
// the rows it covers (internal/audit says what an entry is and how it is
// checked; this package reads the pages).
package evidence

import (
	"context"
	"crypto/hmac"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/fault"
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
	keys     *Keys // nil: no checkpoints
}

// NewService returns an evidence service; keys may be nil (checkpoints
// then answer ErrNoKey).
func NewService(st *store.Store, projects *project.Service, keys *Keys) *Service {
	return &Service{store: st, projects: projects, keys: keys}
}

// ErrNoKey: the deployment has no audit key to sign with.
var ErrNoKey = fmt.Errorf("%w: no audit key is configured (--audit-key-file or CONTEXTD_AUDIT_KEY)", fault.ErrUnavailable)

// Checkpoint signs the head of proj's chain as it is now (admin).
func (s *Service) Checkpoint(ctx context.Context, agent *auth.Agent, proj string) (Checkpoint, error) {
	var seq int64
	var head []byte
	err := s.store.Snapshot(ctx, func(tx *store.Tx) error {
		if err := s.authorize(ctx, tx.DB, agent, proj); err != nil {
			return err
		}
		var err error
		seq, head, err = tx.AuditHead(ctx, proj)
		return err
	})
	if err != nil {
		return Checkpoint{}, err
	}
	if s.keys == nil {
		return Checkpoint{}, ErrNoKey
	}
	return s.keys.Sign(proj, seq, head, time.Now()), nil
}

// authorize lets an admin of proj read its chain; the global chain
// (audit.GlobalChain, agents and keys) is for admins of every project.
func (s *Service) authorize(ctx context.Context, db store.DB, agent *auth.Agent, chain string) error {
	if chain != audit.GlobalChain {
		return s.projects.AuthorizeIn(ctx, db, agent, chain, auth.Admin)
	}
	if !agent.IsAdmin() || !agent.AllScope() {
		return fmt.Errorf("%w: the global chain is for admins of every project (\"*\")", fault.ErrForbidden)
	}
	return nil
}

// Page is a page of a chain with its head, as of one snapshot.
type Page struct {
	Entries  []audit.Entry
	HeadSeq  int64
	HeadHash []byte
	// More: entries after the page's last remain (up to the head it read).
	More bool
}

// A page holds at most MaxPageBytes of entry bodies past its first entry
// (a packet's body carries its request, up to the body limit), read
// pageChunk entries at a time, so that an answer stays bounded whatever
// its limit.
const (
	MaxPageBytes = 8 << 20
	pageChunk    = 100
)

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
	// The grant is read on the primary (it may have changed a moment ago);
	// the entries and their head are history, read in one snapshot through
	// the store's reader (the replica's, when one serves).
	if err := s.authorize(ctx, s.store.DB, agent, proj); err != nil {
		return Page{}, err
	}
	// The primary's head, first: a replica that has not replayed as far
	// answers as one that found nothing, so the page is asked of the
	// primary (store.Read), and a page never ends before an entry that a
	// checkpoint taken a moment ago on the primary names.
	least, _, err := s.store.DB.AuditHead(ctx, proj)
	if err != nil {
		return Page{}, err
	}
	var p Page
	err = s.store.ReadSnapshot(ctx, func(tx *store.Tx) error {
		p = Page{}
		var err error
		if p.HeadSeq, p.HeadHash, err = tx.AuditHead(ctx, proj); err != nil {
			return err
		}
		if p.HeadSeq < least {
			return fmt.Errorf("%w: chain %s is at seq %d here, %d on the primary", fault.ErrNotFound, proj, p.HeadSeq, least)
		}
		p.Entries, p.More, err = entriesPage(ctx, tx, proj, after, limit)
		if n := len(p.Entries); n > 0 && p.Entries[n-1].Seq >= p.HeadSeq {
			p.More = false
		}
		return err
	})
	return p, err
}

// entriesPage reads up to limit entries after seq after, in chunks, until
// the page holds MaxPageBytes of bodies.
func entriesPage(ctx context.Context, tx *store.Tx, chain string, after int64, limit int) ([]audit.Entry, bool, error) {
	var out []audit.Entry
	bytes := 0
	for len(out) < limit {
		want := min(limit-len(out), pageChunk)
		got, err := tx.AuditEntries(ctx, chain, after, want)
		if err != nil {
			return nil, false, err
		}
		for i, e := range got {
			if len(out) > 0 && bytes >= MaxPageBytes {
				return out, true, nil
			}
			out = append(out, e)
			bytes += len(e.Body)
			after = got[i].Seq
		}
		if len(got) < want {
			return out, false, nil
		}
	}
	return out, true, nil
}

// Result is a verification's answer: the entries checked and the head
// they lead to, or the first problem.
type Result struct {
	Entries  int64
	Head     []byte
	Redacted int64 // entries whose subject a redaction removed, with its proof
	// Sealed: every entry was checked against the seals of the audit key
	// (false on a deployment without one); Adopted is the last seq a start
	// seal adopted (entries from before the chain was sealed), 0: none.
	Sealed  bool
	Adopted int64
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
		if err := s.authorize(ctx, tx.DB, agent, proj); err != nil {
			return err
		}
		v := audit.NewVerifier()
		if s.keys != nil {
			v.RequireSeals(proj, SealCheck(s.keys.PublicKey()))
		}
		if err := verifyChain(ctx, tx, proj, v); err != nil {
			return err
		}
		if v.Problem() == nil {
			if err := verifyRows(ctx, tx, proj, v); err != nil {
				return err
			}
		}
		if v.Problem() == nil && proj == audit.GlobalChain && s.keys != nil {
			if err := s.verifyAnswers(ctx, tx, v); err != nil {
				return err
			}
		}
		v.SealedToEnd()
		res = Result{Entries: v.Entries(), Head: v.Head(), Redacted: v.Redacted(), Adopted: v.Adopted(), Sealed: s.keys != nil, Problem: v.Problem()}
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
		now, err := rowBodies(ctx, tx, proj, es)
		if err != nil {
			return err
		}
		for _, e := range es {
			if e.Seq > headSeq {
				v.Extra(e.Seq, headSeq)
				return nil
			}
			if !v.Entry(e, now[e.Kind][e.Subject]) {
				return nil
			}
		}
		after = es[len(es)-1].Seq
	}
	v.AtHead(headSeq, headHash)
	return nil
}

// rowBodies recomputes, for a page of entries of append-only kinds, the
// bodies of the rows they cover as those rows are now, by kind and
// subject.
func rowBodies(ctx context.Context, tx *store.Tx, proj string, es []audit.Entry) (map[string]map[string][]byte, error) {
	var keys, packets, redactions, outcomes []string
	var proposals []audit.Entry
	var versions []int32
	var events []int64
	for _, e := range es {
		switch e.Kind {
		case audit.KindItemVersion:
			if k, n, ok := splitSubject(e.Subject); ok {
				keys, versions = append(keys, k), append(versions, int32(n))
			}
		case audit.KindPacket:
			packets = append(packets, e.Subject)
		case audit.KindRedaction:
			redactions = append(redactions, e.Subject)
		case audit.KindOutcome:
			outcomes = append(outcomes, e.Subject)
		case audit.KindProposal, audit.KindProposalDecision:
			proposals = append(proposals, e) // proposals.go
		case audit.KindHandoffEvent:
			if n, err := strconv.ParseInt(e.Subject, 10, 64); err == nil {
				events = append(events, n)
			}
		}
	}
	out := map[string]map[string][]byte{}
	var err error
	if out[audit.KindItemVersion], err = tx.ItemVersionBodies(ctx, proj, keys, versions); err != nil {
		return nil, err
	}
	if out[audit.KindPacket], err = tx.PacketBodies(ctx, proj, packets); err != nil {
		return nil, err
	}
	if out[audit.KindHandoffEvent], err = tx.HandoffEventBodies(ctx, proj, events); err != nil {
		return nil, err
	}
	if out[audit.KindRedaction], err = tx.RedactionBodies(ctx, proj, redactions); err != nil {
		return nil, err
	}
	if out[audit.KindOutcome], err = tx.OutcomeBodies(ctx, proj, outcomes); err != nil {
		return nil, err
	}
	if err := proposalBodies(ctx, tx, proj, proposals, out); err != nil {
		return nil, err
	}
	return out, nil
}

// splitSubject is the key and version an item version's subject names.
func splitSubject(subject string) (string, int, bool) {
	i := strings.LastIndexByte(subject, '@')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(subject[i+1:])
	return subject[:i], n, err == nil
}

// verifyRows checks the rows against the chain: every row of an
// append-only kind has an entry, every row of a mutable kind is what its
// last entry says, every item's state follows its versions' entries, and
// nothing the chain has is missing.
func verifyRows(ctx context.Context, tx *store.Tx, proj string, v *audit.Verifier) error {
	checks := []func(context.Context, *store.Tx, string, *audit.Verifier) (bool, error){
		coveredVersions, coveredPackets, coveredEvents, proveRedactedPackets, coveredRedactions, coveredOutcomes,
		coveredProposals, coveredDecisions,
		currentHandoffs, currentProject, currentRolePolicies, currentPacketTexts, itemStates,
	}
	if proj == audit.GlobalChain {
		checks = checks[:0]
		checks = append(checks, currentAgents)
	}
	for _, check := range checks {
		if ok, err := check(ctx, tx, proj, v); err != nil || !ok {
			return err
		}
	}
	return nil
}

func coveredVersions(ctx context.Context, tx *store.Tx, proj string, v *audit.Verifier) (bool, error) {
	for after := (store.VersionKey{}); ; {
		page, err := tx.ItemVersionKeys(ctx, proj, after.Key, after.Version, verifyPage)
		if err != nil {
			return false, err
		}
		for _, k := range page {
			if !v.Covered(audit.KindItemVersion, audit.ItemVersionSubject(k.Key, k.Version)) {
				return false, nil
			}
		}
		if len(page) < verifyPage {
			return true, nil
		}
		after = page[len(page)-1]
	}
}

func coveredPackets(ctx context.Context, tx *store.Tx, proj string, v *audit.Verifier) (bool, error) {
	for after := ""; ; {
		page, err := tx.PacketIDs(ctx, proj, after, verifyPage)
		if err != nil {
			return false, err
		}
		for _, id := range page {
			if !v.Covered(audit.KindPacket, id) {
				return false, nil
			}
		}
		if len(page) < verifyPage {
			return true, nil
		}
		after = page[len(page)-1]
	}
}

func coveredEvents(ctx context.Context, tx *store.Tx, proj string, v *audit.Verifier) (bool, error) {
	for after := int64(0); ; {
		page, err := tx.HandoffEventSeqs(ctx, proj, after, verifyPage)
		if err != nil {
			return false, err
		}
		for _, seq := range page {
			if !v.Covered(audit.KindHandoffEvent, audit.HandoffEventSubject(seq)) {
				return false, nil
			}
		}
		if len(page) < verifyPage {
			return true, nil
		}
		after = page[len(page)-1]
	}
}

func currentHandoffs(ctx context.Context, tx *store.Tx, proj string, v *audit.Verifier) (bool, error) {
	seen := map[string]bool{}
	for after := ""; ; {
		page, err := tx.HandoffBodies(ctx, proj, after, verifyPage)
		if err != nil {
			return false, err
		}
		for _, h := range page {
			seen[h.Subject] = true
			if !v.Current(audit.KindHandoff, h.Subject, h.Body) {
				return false, nil
			}
		}
		if len(page) < verifyPage {
			return v.MissingCurrent(audit.KindHandoff, seen), nil
		}
		after = page[len(page)-1].Subject
	}
}

func coveredRedactions(ctx context.Context, tx *store.Tx, proj string, v *audit.Verifier) (bool, error) {
	for after := ""; ; {
		page, err := tx.RedactionIDs(ctx, proj, after, verifyPage)
		if err != nil {
			return false, err
		}
		for _, id := range page {
			if !v.Covered(audit.KindRedaction, id) {
				return false, nil
			}
		}
		if len(page) < verifyPage {
			return true, nil
		}
		after = page[len(page)-1]
	}
}

func coveredOutcomes(ctx context.Context, tx *store.Tx, proj string, v *audit.Verifier) (bool, error) {
	for after := ""; ; {
		page, err := tx.OutcomeIDs(ctx, proj, after, verifyPage)
		if err != nil {
			return false, err
		}
		for _, id := range page {
			if !v.Covered(audit.KindOutcome, id) {
				return false, nil
			}
		}
		if len(page) < verifyPage {
			return true, nil
		}
		after = page[len(page)-1]
	}
}

// currentPacketTexts checks the text of every packet a redaction
// overwrote against its last packet_redaction entry.
func currentPacketTexts(ctx context.Context, tx *store.Tx, proj string, v *audit.Verifier) (bool, error) {
	ids := v.LatestSubjects(audit.KindPacketRedaction)
	for len(ids) > 0 {
		page := ids[:min(len(ids), verifyPage)]
		ids = ids[len(page):]
		now, err := tx.PacketRedactionBodies(ctx, proj, page)
		if err != nil {
			return false, err
		}
		for _, id := range page {
			if !v.Current(audit.KindPacketRedaction, id, now[id]) {
				return false, nil
			}
		}
	}
	return true, nil
}

func currentAgents(ctx context.Context, tx *store.Tx, _ string, v *audit.Verifier) (bool, error) {
	seen := map[string]bool{}
	for after := ""; ; {
		page, err := tx.AgentBodies(ctx, after, verifyPage)
		if err != nil {
			return false, err
		}
		for _, a := range page {
			seen[a.Subject] = true
			if !v.Current(audit.KindAgent, a.Subject, a.Body) {
				return false, nil
			}
		}
		if len(page) < verifyPage {
			return v.MissingCurrent(audit.KindAgent, seen), nil
		}
		after = page[len(page)-1].Subject
	}
}

func currentProject(ctx context.Context, tx *store.Tx, proj string, v *audit.Verifier) (bool, error) {
	body, err := tx.ProjectBody(ctx, proj)
	if err != nil {
		return false, err
	}
	return v.Current(audit.KindProject, proj, body), nil
}

func itemStates(ctx context.Context, tx *store.Tx, proj string, v *audit.Verifier) (bool, error) {
	seen := map[string]bool{}
	for after := ""; ; {
		page, err := tx.ItemStates(ctx, proj, after, verifyPage)
		if err != nil {
			return false, err
		}
		for _, it := range page {
			seen[it.Key] = true
			if !v.ItemState(it.Key, it.Current, it.Live) || !v.ItemMirrors(it.Key, it.Mirrors) {
				return false, nil
			}
		}
		if len(page) < verifyPage {
			return v.MissingItem(seen), nil
		}
		after = page[len(page)-1].Key
	}
}

// String is a result as the CLI prints it.
func (r Result) String() string {
	if r.Problem != nil {
		return fmt.Sprintf("bad seq=%d problem=%s: %s", r.Problem.Seq, r.Problem.Code, r.Problem.Detail)
	}
	return fmt.Sprintf("ok entries=%d head=%s", r.Entries, audit.HexHead(r.Head))
}

// verifyAnswers checks every stored idempotency answer against its HMAC:
// one forged in the table (or whose MAC was removed) is a state mismatch
// of the global chain, found here before a retry would be refused for it.
func (s *Service) verifyAnswers(ctx context.Context, tx *store.Tx, v *audit.Verifier) error {
	for agent, key := "", ""; ; {
		page, err := tx.IdempotencyAnswers(ctx, agent, key, verifyPage)
		if err != nil {
			return err
		}
		for _, a := range page {
			if !hmac.Equal(a.MAC, s.keys.MAC(a.Message())) {
				v.Mismatch(fmt.Sprintf("the stored answer to agent %s's Idempotency-Key %q fails its HMAC: written by someone without the audit key", a.AgentID, a.Key))
				return nil
			}
		}
		if len(page) < verifyPage {
			return nil
		}
		agent, key = page[len(page)-1].AgentID, page[len(page)-1].Key
	}
}
