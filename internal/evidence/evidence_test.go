package evidence_test

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/evidence"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/testfactory"
)

// newKeys is a fresh audit key, parsed as its file holds it.
func newKeys(t *testing.T) *evidence.Keys {
	t.Helper()
	seed := make([]byte, 32)
	_, _ = rand.Read(seed)
	k, err := evidence.ParseKey(base64.StdEncoding.EncodeToString(seed))
	require.NoError(t, err)
	return k
}

// sealed is a database whose chains the key seals, as serve opens a fresh
// one: the entries the migrations wrote are adopted, every later write is
// sealed. acme holds a project entry, two versions of refunds, shipping
// and a packet.
type sealed struct {
	pool  *pgxpool.Pool
	st    *store.Store
	keys  *evidence.Keys
	svc   *evidence.Service
	admin *auth.Agent
}

func newSealed(t *testing.T) *sealed {
	t.Helper()
	pool := pgtest.New(t)
	st := store.New(pool, 0)
	keys := newKeys(t)
	_, err := st.AdoptChains(t.Context(), keys.Seal)
	require.NoError(t, err)
	s := &sealed{pool: pool, st: st, keys: keys, svc: app.New(st, app.WithKeys(keys)).Evidence, admin: testfactory.Admin(t, st)}
	testfactory.Project(t, st, &testfactory.ProjectOpts{Name: "acme", By: s.admin})
	for _, in := range []item.Input{
		{Key: "refunds", Content: "Refunds take five days."},
		{Key: "refunds", Content: "Refunds take three days."},
		{Key: "shipping", Content: "Ships in two days."},
	} {
		testfactory.Item(t, st, "acme", &testfactory.ItemOpts{By: s.admin, Input: in})
	}
	testfactory.Packet(t, st, "acme", &testfactory.PacketOpts{By: s.admin})
	return s
}

// all is every entry of a chain, read a page of limit at a time.
func (s *sealed) all(t *testing.T, chain string, limit int) []audit.Entry {
	t.Helper()
	var out []audit.Entry
	for after := int64(0); ; {
		p, err := s.svc.Entries(t.Context(), s.admin, chain, after, limit)
		require.NoError(t, err)
		require.LessOrEqual(t, len(p.Entries), limit)
		out = append(out, p.Entries...)
		if !p.More {
			return out
		}
		after = p.Entries[len(p.Entries)-1].Seq
	}
}

// seqOf is the seq of the entry about subject.
func seqOf(t *testing.T, es []audit.Entry, subject string) int64 {
	t.Helper()
	for _, e := range es {
		if e.Subject == subject {
			return e.Seq
		}
	}
	t.Fatalf("no entry about %s", subject)
	return 0
}

// tamper runs SQL as the database's superuser, with triggers off.
func (s *sealed) tamper(t *testing.T, sql string) {
	t.Helper()
	conn, err := s.pool.Acquire(t.Context())
	require.NoError(t, err)
	defer conn.Release()
	_, err = conn.Exec(t.Context(), "SET session_replication_role = replica; "+sql+"; SET session_replication_role = origin")
	require.NoError(t, err)
}

// After the writes every chain verifies, sealed by the key to its end, to
// the head the entries lead to; only admins of the chain may ask.
func TestVerifyAfterWrites(t *testing.T) {
	t.Parallel()
	s := newSealed(t)
	ctx := t.Context()
	res, err := s.svc.Verify(ctx, s.admin, "acme")
	require.NoError(t, err)
	require.Nil(t, res.Problem, "%v", res.Problem)
	require.True(t, res.Sealed)
	es := s.all(t, "acme", 100)
	require.EqualValues(t, len(es), res.Entries)
	require.Equal(t, es[len(es)-1].ChainHash, res.Head)
	seqOf(t, es, "refunds@2")
	seqOf(t, es, "shipping@1")

	for _, chain := range []string{audit.GlobalChain, ctxtype.SharedProject} {
		res, err := s.svc.Verify(ctx, s.admin, chain)
		require.NoError(t, err)
		require.Nil(t, res.Problem, "chain %q: %v", chain, res.Problem)
		require.True(t, res.Sealed)
	}
	shared, err := s.svc.Verify(ctx, s.admin, ctxtype.SharedProject)
	require.NoError(t, err)
	require.Positive(t, shared.Adopted, "the migrations' _shared entry is covered by the start seal AdoptChains wrote")

	editor, _ := testfactory.Agent(t, s.st, &testfactory.AgentOpts{Projects: []string{"acme"}})
	_, err = s.svc.Verify(ctx, editor, "acme")
	require.ErrorIs(t, err, fault.ErrForbidden)
	acmeAdmin, _ := testfactory.Agent(t, s.st, &testfactory.AgentOpts{Permission: auth.Admin, Projects: []string{"acme"}})
	_, err = s.svc.Verify(ctx, acmeAdmin, "acme")
	require.NoError(t, err)
	_, err = s.svc.Verify(ctx, acmeAdmin, audit.GlobalChain)
	require.ErrorIs(t, err, fault.ErrForbidden, "the global chain is for admins of every project")
	_, err = s.svc.Verify(ctx, s.admin, "nope")
	require.ErrorIs(t, err, project.ErrNotFound)
}

// Without AdoptChains, the entry the migrations wrote is one no seal
// covers: a keyed verification says so.
func TestUnadoptedChainIsUnsealed(t *testing.T) {
	t.Parallel()
	st := testfactory.Store(t)
	svc := app.New(st, app.WithKeys(newKeys(t))).Evidence
	res, err := svc.Verify(t.Context(), testfactory.Admin(t, st), ctxtype.SharedProject)
	require.NoError(t, err)
	require.NotNil(t, res.Problem)
	require.Equal(t, audit.Unsealed, res.Problem.Code)
}

// A checkpoint signs the chain's head as it is: its seq and hash are the
// last entry's, its signature verifies with the deployment's public key
// and with no other, and no longer once a field changes. Without a key
// there are no checkpoints.
func TestCheckpointSignsTheHead(t *testing.T) {
	t.Parallel()
	s := newSealed(t)
	ctx := t.Context()
	c, err := s.svc.Checkpoint(ctx, s.admin, "acme")
	require.NoError(t, err)
	es := s.all(t, "acme", 100)
	last := es[len(es)-1]
	require.Equal(t, "acme", c.Project)
	require.Equal(t, last.Seq, c.Seq)
	require.Equal(t, audit.HexHead(last.ChainHash), c.Head)
	require.NoError(t, c.VerifySignature(s.keys.PublicKey()))
	require.NoError(t, c.VerifySignature(nil), "its own public key")
	require.Error(t, c.VerifySignature(newKeys(t).PublicKey()), "another deployment's key")
	forged := c
	forged.Seq--
	require.Error(t, forged.VerifySignature(s.keys.PublicKey()), "the signature covers the seq")

	unkeyed := evidence.NewService(s.st, project.NewService(s.st), nil)
	_, err = unkeyed.Checkpoint(ctx, s.admin, "acme")
	require.ErrorIs(t, err, evidence.ErrNoKey)
}

// Entries pages the chain in seq order, a page's More telling whether one
// follows; each entry hashes from its body, and each chain hash links it
// to the one before, up to the head.
func TestEntriesPages(t *testing.T) {
	t.Parallel()
	s := newSealed(t)
	ctx := t.Context()
	first, err := s.svc.Entries(ctx, s.admin, "acme", 0, 2)
	require.NoError(t, err)
	require.Len(t, first.Entries, 2)
	require.True(t, first.More)
	require.Greater(t, first.HeadSeq, int64(2))

	es := s.all(t, "acme", 2)
	require.Len(t, es, int(first.HeadSeq))
	require.Equal(t, first.Entries, es[:2])
	prev := audit.Genesis
	for i, e := range es {
		require.EqualValues(t, i+1, e.Seq)
		eh := sha256.Sum256(e.Body)
		require.Equal(t, eh[:], e.EntryHash, "seq %d", e.Seq)
		ch := sha256.Sum256(append(bytes.Clone(prev), eh[:]...))
		require.Equal(t, ch[:], e.ChainHash, "seq %d", e.Seq)
		prev = e.ChainHash
	}
	require.Equal(t, first.HeadHash, prev)
	require.Equal(t, audit.KindProject, es[0].Kind)

	_, err = s.svc.Entries(ctx, s.admin, "acme", 0, evidence.MaxPage+1)
	require.ErrorIs(t, err, fault.ErrInvalid)
	_, err = s.svc.Entries(ctx, s.admin, "acme", -1, 10)
	require.ErrorIs(t, err, fault.ErrInvalid)
}

// A row or entry changed behind the service's back, as a superuser can,
// is reported at the entry where it happened.
func TestVerifyFindsTampering(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, sql, code string
		subject         string // the entry the problem is at; "": the last
	}{
		{"a version's content", `UPDATE item_versions SET content = 'Refunds take fifty days.' WHERE project = 'acme' AND key = 'refunds' AND version = 1`,
			audit.ContentChanged, "refunds@1"},
		{"an entry deleted", `DELETE FROM audit_entries WHERE chain = 'acme' AND seq = 2`, audit.EntryMissing, ""},
		{"the last seal deleted", `DELETE FROM audit_seals WHERE chain = 'acme' AND seq = (SELECT max(seq) FROM audit_seals WHERE chain = 'acme')`,
			audit.Unsealed, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newSealed(t)
			es := s.all(t, "acme", 100)
			s.tamper(t, tc.sql)
			res, err := s.svc.Verify(t.Context(), s.admin, "acme")
			require.NoError(t, err)
			require.NotNil(t, res.Problem, "verification must fail")
			require.Equal(t, tc.code, res.Problem.Code, "%v", res.Problem)
			require.NotEmpty(t, res.Problem.Detail)
			switch {
			case tc.subject != "":
				require.Equal(t, seqOf(t, es, tc.subject), res.Problem.Seq)
			case tc.code == audit.EntryMissing:
				require.EqualValues(t, 2, res.Problem.Seq)
			}
		})
	}
}
