package packet_test

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/packet"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/testfactory"
)

// shop is a project "acme" with an implementer (edit) and four items:
// two that fire always, one hidden from implementers, and one whose
// keyword the packets below never say.
type shop struct {
	st     *store.Store
	svc    *app.App
	admin  *auth.Agent
	impl   *auth.Agent
	always map[string]string // key → content of the always items
}

func newShop(t *testing.T) *shop {
	t.Helper()
	st := testfactory.Store(t)
	s := &shop{st: st, svc: app.New(st), admin: testfactory.Admin(t, st), always: map[string]string{
		"refunds": "Refunds take five days.", "tone": "Answer in a friendly tone."}}
	testfactory.Project(t, st, &testfactory.ProjectOpts{Name: "acme", By: s.admin})
	s.impl, _ = testfactory.Agent(t, st, &testfactory.AgentOpts{Role: "implementer", Projects: []string{"acme"}})
	for key, content := range s.always {
		testfactory.Item(t, st, "acme", &testfactory.ItemOpts{By: s.admin, Input: item.Input{Key: key, Content: content}})
	}
	testfactory.Item(t, st, "acme", &testfactory.ItemOpts{By: s.admin, Input: item.Input{Key: "secret",
		Content: "The critics' rubric.", Roles: &ctxtype.Roles{HiddenFrom: []string{"implementer"}}}})
	testfactory.Item(t, st, "acme", &testfactory.ItemOpts{By: s.admin, Input: item.Input{Key: "chargebacks",
		Content: "Chargebacks go to finance.", Trigger: &ctxtype.Trigger{Keywords: []string{"chargeback"}}}})
	return s
}

func (s *shop) assemble(t *testing.T) *packet.Packet {
	t.Helper()
	p, err := s.svc.Packets.Assemble(t.Context(), s.impl, "acme", &ctxtype.Request{TargetRole: "implementer", TokenBudget: 4000})
	require.NoError(t, err)
	return p
}

// requireConsistent: the text hashes to the stored hash, and every
// included item has a span inside the text holding its content, the
// spans of different items not overlapping; nothing excluded has a span.
func requireConsistent(t *testing.T, p *packet.Packet, contents map[string]string) {
	t.Helper()
	sum := sha256.Sum256([]byte(p.Rendered))
	require.Equal(t, hex.EncodeToString(sum[:]), p.RenderedSHA256)
	var spans []ctxtype.Span
	included := map[string]bool{}
	for _, r := range p.Records {
		if r.Decision != ctxtype.Included {
			require.Nil(t, r.Span, "excluded %s has no place in the text", r.SubjectKey)
			continue
		}
		if r.SubjectKind != ctxtype.SubjectItem {
			continue
		}
		require.NotNil(t, r.Span, "included item %s has a span", r.SubjectKey)
		require.True(t, 0 <= r.Span.Start && r.Span.Start < r.Span.End && r.Span.End <= len(p.Rendered), "%s %+v in %d bytes", r.SubjectKey, *r.Span, len(p.Rendered))
		require.Contains(t, p.Rendered[r.Span.Start:r.Span.End], contents[r.SubjectKey], "the span of %s holds its content", r.SubjectKey)
		spans = append(spans, *r.Span)
		included[r.SubjectKey] = true
	}
	for key := range contents {
		require.True(t, included[key], "%s included", key)
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].Start < spans[j].Start })
	for i := 1; i < len(spans); i++ {
		require.LessOrEqual(t, spans[i-1].End, spans[i].Start, "item spans do not overlap")
	}
}

// decisions are records without their Kind and Source, which feed the
// provenance summary and are not stored with each record.
func decisions(rs []ctxtype.Record) []ctxtype.Record {
	out := make([]ctxtype.Record, len(rs))
	for i, r := range rs {
		r.Kind, r.Source = "", ""
		out[i] = r
	}
	return out
}

// Assemble stores a packet whose records and spans agree with its text,
// and leaves out an item hidden from the role (recorded for admins only)
// and one whose trigger did not fire; Get returns the same packet, to the
// role's agents and admins only.
func TestAssembleAndGet(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	ctx := t.Context()
	p := s.assemble(t)
	requireConsistent(t, p, s.always)
	require.NotContains(t, p.Rendered, "rubric", "hidden from implementers")
	require.NotContains(t, p.Rendered, "Chargebacks", "its keyword was not said")
	for _, r := range p.Records {
		require.False(t, r.AdminOnly, "an implementer sees no admin-only record")
	}

	got, err := s.svc.Packets.Get(ctx, s.impl, "acme", p.ID)
	require.NoError(t, err)
	require.Equal(t, p.Rendered, got.Rendered)
	require.Equal(t, p.RenderedSHA256, got.RenderedSHA256)
	require.Equal(t, decisions(p.Records), decisions(got.Records), "the records stored are those returned")
	require.Equal(t, p.Provenance, got.Provenance)
	require.Equal(t, len(s.always), got.Provenance.ByKind["knowledge"])
	require.Equal(t, s.impl.ID, got.CreatedBy)
	requireConsistent(t, got, s.always)

	asAdmin, err := s.svc.Packets.Get(ctx, s.admin, "acme", p.ID)
	require.NoError(t, err)
	var hidden *ctxtype.Record
	for i, r := range asAdmin.Records {
		if r.SubjectKey == "secret" {
			hidden = &asAdmin.Records[i]
		}
	}
	require.NotNil(t, hidden, "an admin sees the hidden item's record")
	require.True(t, hidden.AdminOnly)
	require.Equal(t, ctxtype.Excluded, hidden.Decision)
	require.Equal(t, ctxtype.ReasonHidden, hidden.Reason)

	critic, _ := testfactory.Agent(t, s.st, &testfactory.AgentOpts{Role: "critic", Projects: []string{"acme"}})
	_, err = s.svc.Packets.Get(ctx, critic, "acme", p.ID)
	require.ErrorIs(t, err, packet.ErrNotFound, "another role's packet does not exist for it")
	_, err = s.svc.Packets.Get(ctx, s.impl, "acme", "ctxpkt_missing")
	require.ErrorIs(t, err, packet.ErrNotFound)
}

// Why answers from the packet's record for an included item (its span
// and version as they were), and otherwise says why not: a trigger that
// did not fire, a key that never existed, and a hidden item answered
// exactly as a key that never existed.
func TestWhy(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	ctx := t.Context()
	p := s.assemble(t)

	a, err := s.svc.Packets.Why(ctx, s.impl, "acme", p.ID, "refunds", "")
	require.NoError(t, err)
	require.Equal(t, ctxtype.Included, a.Decision)
	require.NotNil(t, a.Record)
	require.NotNil(t, a.Record.Span)
	require.Equal(t, s.always["refunds"], a.Item.Content)
	require.Equal(t, 1, a.Item.Version)
	require.Contains(t, p.Rendered[a.Record.Span.Start:a.Record.Span.End], a.Item.Content)

	a, err = s.svc.Packets.Why(ctx, s.impl, "acme", p.ID, "chargebacks", "")
	require.NoError(t, err)
	require.Equal(t, "not_candidate", a.Decision)
	require.Equal(t, "not_triggered", a.Reason)
	require.Contains(t, a.Detail, "chargeback")

	never, err := s.svc.Packets.Why(ctx, s.impl, "acme", p.ID, "never", "")
	require.NoError(t, err)
	require.Equal(t, "did_not_exist", never.Reason)
	secret, err := s.svc.Packets.Why(ctx, s.impl, "acme", p.ID, "secret", "")
	require.NoError(t, err)
	require.Equal(t, never.Reason, secret.Reason)
	require.Equal(t, strings.ReplaceAll(never.Detail, "never", "secret"), secret.Detail, "hidden reads as missing")
	require.Nil(t, secret.Item)
}

// Replay assembles the stored request again on the packet's snapshot: the
// same bytes, though an included item has a newer version since.
func TestReplayIsIdentical(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	ctx := t.Context()
	p := s.assemble(t)
	testfactory.Item(t, s.st, "acme", &testfactory.ItemOpts{By: s.admin, Input: item.Input{Key: "refunds", Content: "Refunds take two days."}})
	later := s.assemble(t)
	require.Contains(t, later.Rendered, "two days", "a new packet reads the new version")

	rep, err := s.svc.Packets.Replay(ctx, s.impl, "acme", p.ID)
	require.NoError(t, err)
	require.True(t, rep.Identical, "%+v", rep.Differences)
	require.Empty(t, rep.Differences)
	require.Equal(t, p.RenderedSHA256, rep.SHA256Now)
	require.Equal(t, p.RenderedSHA256, rep.SHA256Then)
	require.False(t, rep.Redacted)
}

// Injections lists the packets that included an item, newest first, with
// the version each included, one page at a time; an item no packet
// included has none.
func TestInjections(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	ctx := t.Context()
	first := s.assemble(t)
	testfactory.Item(t, s.st, "acme", &testfactory.ItemOpts{By: s.admin, Input: item.Input{Key: "refunds", Content: "Refunds take two days."}})
	second := s.assemble(t)

	inj, next, of, err := s.svc.Packets.Injections(ctx, s.impl, "acme", "refunds", packet.InjectionParams{Limit: 10})
	require.NoError(t, err)
	require.Equal(t, "acme", of)
	require.Empty(t, next)
	require.Len(t, inj, 2)
	require.Equal(t, []string{second.ID, first.ID}, []string{inj[0].PacketID, inj[1].PacketID}, "newest first")
	require.Equal(t, []int{2, 1}, []int{inj[0].Version, inj[1].Version})
	for _, in := range inj {
		require.Equal(t, "implementer", in.TargetRole)
		require.Equal(t, s.impl.ID, in.Agent)
	}

	page, next, _, err := s.svc.Packets.Injections(ctx, s.impl, "acme", "refunds", packet.InjectionParams{Limit: 1})
	require.NoError(t, err)
	require.Len(t, page, 1)
	require.NotEmpty(t, next)
	rest, next, _, err := s.svc.Packets.Injections(ctx, s.impl, "acme", "refunds", packet.InjectionParams{Limit: 1, Cursor: next})
	require.NoError(t, err)
	require.Empty(t, next)
	require.Equal(t, []string{second.ID, first.ID}, []string{page[0].PacketID, rest[0].PacketID})

	v1 := 1
	only, _, _, err := s.svc.Packets.Injections(ctx, s.impl, "acme", "refunds", packet.InjectionParams{Limit: 10, Version: &v1})
	require.NoError(t, err)
	require.Len(t, only, 1)
	require.Equal(t, first.ID, only[0].PacketID)

	none, _, _, err := s.svc.Packets.Injections(ctx, s.impl, "acme", "chargebacks", packet.InjectionParams{Limit: 10})
	require.NoError(t, err)
	require.Empty(t, none)
}
