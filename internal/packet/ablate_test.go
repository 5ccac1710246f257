package packet_test

// Counterfactual packets (Ablate): the stored request assembled again on
// the original's snapshot without some entries — their records excluded,
// reason ablated, the rest unchanged but for what the freed budget lets
// in — stored as a packet of its own, linked both ways, and replayed with
// the same entries left out.

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/packet"
	"github.com/contextd/contextd/internal/validation"
)

// subjectOf names a record's entry, and its fate.
func subjectOf(r ctxtype.Record) string {
	return r.SubjectKind + ":" + r.SubjectProject + "/" + r.SubjectKey
}

func fates(recs []ctxtype.Record) map[string]string {
	out := map[string]string{}
	for _, r := range recs {
		out[subjectOf(r)] = r.Decision + ":" + r.Reason
	}
	return out
}

func (w *world) ablate(proj string, viewer *auth.Agent, id string, without ...packet.Without) *packet.Packet {
	w.t.Helper()
	p, err := w.svc.Packets.Ablate(w.t.Context(), viewer, proj, id, without)
	require.NoError(w.t, err)
	return p
}

// ablateFails returns the one field of the validation error Ablate gives.
func (w *world) ablateFails(proj string, viewer *auth.Agent, id string, without ...packet.Without) validation.Field {
	w.t.Helper()
	_, err := w.svc.Packets.Ablate(w.t.Context(), viewer, proj, id, without)
	var verr *validation.Error
	require.True(w.t, errors.As(err, &verr), "%v", err)
	require.Len(w.t, verr.Fields, 1, "%v", verr.Fields)
	return verr.Fields[0]
}

// TestAblationLeavesOutOneItem: with a budget that fits everything, the
// counterfactual without one item is the original's text less that item's
// block, every other record keeps its fate, the item's record says
// excluded/ablated; the two packets name each other, the same ablation
// gives the same bytes, and the ablation replays byte for byte (its stored
// request carries what it left out).
func TestAblationLeavesOutOneItem(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("acme")
	w.batch("acme", []spec{
		{Key: "greeting", Content: "Greet the customer by name.", Priority: 30},
		{Key: "refund.policy", Title: "Refund policy", Content: "Refunds within 30 days need a receipt.", Priority: 20},
		{Key: "shipping", Content: "Orders ship within two days.", Priority: 10},
	})
	w.batch(ctxtype.SharedProject, []spec{{Key: "tone", Content: "Be brief and kind.", Priority: 5}})
	sup := w.reader("support", "acme")
	req := ctxtype.Request{TargetRole: "support", TokenBudget: 8000, Task: &ctxtype.Task{Objective: "Answer the refund question."},
		AcceptanceCriteria: []ctxtype.Criterion{{ID: "c1", Description: "Quote the policy.", VerificationKind: "human"}}}
	orig := w.assemble("acme", sup, req)
	var span *ctxtype.Span
	for _, r := range orig.Records {
		if r.SubjectKey == "refund.policy" {
			span = r.Span
		}
	}
	require.NotNil(t, span, "the original includes refund.policy")

	abl := w.ablate("acme", sup, orig.ID, packet.Without{Key: "refund.policy"})
	require.NotEqual(t, orig.ID, abl.ID)
	require.Equal(t, orig.ID, abl.AblationOf)
	require.Equal(t, orig.Snapshot, abl.Snapshot, "assembled on the original's snapshot")
	require.Equal(t, sup.ID, abl.CreatedBy)
	require.Equal(t, orig.Rendered[:span.Start]+orig.Rendered[span.End:], abl.Rendered, "the original less that block")
	require.NotContains(t, abl.Rendered, "Refunds within 30 days")

	want := fates(orig.Records)
	want["item:acme/refund.policy"] = "excluded:ablated"
	require.Equal(t, want, fates(abl.Records))
	for _, r := range abl.Records {
		if r.SubjectKey == "refund.policy" {
			require.Equal(t, 1, r.SubjectVersion)
			require.Contains(t, r.Detail, orig.ID)
			require.Nil(t, r.Span)
		}
	}
	require.Equal(t, orig.Used-recordTokens(orig.Records, "refund.policy"), abl.Used, "the block's tokens are freed")

	require.Equal(t, []string{abl.ID}, w.get("acme", sup, orig.ID).Ablations)
	stored := w.get("acme", sup, abl.ID)
	require.Equal(t, orig.ID, stored.AblationOf)
	require.Equal(t, abl.Rendered, stored.Rendered)
	require.Empty(t, stored.Ablations)

	rp := w.replay("acme", sup, abl.ID)
	require.True(t, rp.Identical, "%+v", rp.Differences)
	require.Empty(t, rp.Differences)

	again := w.ablate("acme", sup, orig.ID, packet.Without{Key: "refund.policy", Layer: "project"})
	require.Equal(t, abl.Rendered, again.Rendered, "the same ablation, the same bytes")
	require.Equal(t, []string{abl.ID, again.ID}, w.get("acme", sup, orig.ID).Ablations, "oldest first")
	require.True(t, w.replay("acme", sup, orig.ID).Identical, "the original is untouched")
}

func recordTokens(recs []ctxtype.Record, key string) int {
	for _, r := range recs {
		if r.SubjectKey == key {
			return r.Tokens
		}
	}
	return 0
}

// TestAblationOfRequestPartsSharedItemsAndAgain: a _shared item (by
// layer), the criteria and a context packet are left out with their
// records saying so; an ablation of that ablation leaves out its parent's
// entries too; both replay byte for byte.
func TestAblationOfRequestPartsSharedItemsAndAgain(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("acme")
	w.batch("acme", []spec{{Key: "refund.policy", Content: "Refunds within 30 days need a receipt.", Priority: 20}})
	w.batch(ctxtype.SharedProject, []spec{{Key: "tone", Content: "Be brief and kind.", Priority: 5}})
	sup := w.reader("support", "acme")
	cp, _ := json.Marshal(map[string]any{"source": "UserSelection", "title": "selection", "content": "func refund(order Order) error", "priority": 5})
	orig := w.assemble("acme", sup, ctxtype.Request{TargetRole: "support", TokenBudget: 8000,
		AcceptanceCriteria: []ctxtype.Criterion{{ID: "c1", Description: "Quote the policy verbatim.", VerificationKind: "human"}},
		ContextPackets:     []json.RawMessage{cp}, AgentContext: map[string]any{"channel": "email"}})
	require.Contains(t, orig.Rendered, "func refund(order Order)")

	abl := w.ablate("acme", sup, orig.ID, packet.Without{Key: "tone", Layer: "shared"}, packet.Without{Request: "criteria"},
		packet.Without{Request: "context_packets[0]"})
	for _, gone := range []string{"Be brief and kind.", "Quote the policy verbatim.", "func refund(order Order)"} {
		require.Contains(t, orig.Rendered, gone)
		require.NotContains(t, abl.Rendered, gone)
	}
	require.Contains(t, abl.Rendered, "Refunds within 30 days")
	require.Contains(t, abl.Rendered, "channel")
	want := fates(orig.Records)
	for _, k := range []string{"item:_shared/tone", "request:/criteria", "request:/context_packets[0]"} {
		require.Contains(t, want, k)
		want[k] = "excluded:ablated"
	}
	require.Equal(t, want, fates(abl.Records))
	require.True(t, w.replay("acme", sup, abl.ID).Identical)

	// The shared item is in no project layer: asking for it there names
	// nothing the packet included.
	f := w.ablateFails("acme", sup, orig.ID, packet.Without{Key: "tone", Layer: "project"})
	require.Equal(t, "/without/0", f.Pointer)
	require.Equal(t, "not_included", f.Code)

	// An ablation of the ablation: refund.policy goes too; what the parent
	// left out stays out, and naming it again is refused (not included).
	abl2 := w.ablate("acme", sup, abl.ID, packet.Without{Key: "refund.policy"})
	require.Equal(t, abl.ID, abl2.AblationOf)
	require.NotContains(t, abl2.Rendered, "Refunds within 30 days")
	require.NotContains(t, abl2.Rendered, "Be brief and kind.")
	want["item:acme/refund.policy"] = "excluded:ablated"
	require.Equal(t, want, fates(abl2.Records))
	require.True(t, w.replay("acme", sup, abl2.ID).Identical)
	f = w.ablateFails("acme", sup, abl.ID, packet.Without{Request: "criteria"})
	require.Equal(t, "/without/0", f.Pointer)
	require.Equal(t, "not_included", f.Code)
}

// TestAblationFreesBudget: an entry the budget left out of the original
// comes in when an ablation frees the room it needed.
func TestAblationFreesBudget(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("acme")
	body := strings.Repeat("words of equal length ", 30)
	w.batch("acme", []spec{
		{Key: "a", Content: "A " + body, Priority: 30},
		{Key: "b", Content: "B " + body, Priority: 20},
		{Key: "c", Content: "C " + body, Priority: 10},
	})
	sup := w.reader("support", "acme")
	// A budget one token short of all three: a and b go in, c does not.
	full := w.assemble("acme", sup, ctxtype.Request{TargetRole: "support", TokenBudget: 8000})
	orig := w.assemble("acme", sup, ctxtype.Request{TargetRole: "support", TokenBudget: full.Used - 1})
	f := fates(orig.Records)
	require.Equal(t, "included:", f["item:acme/a"], "%v", f)
	require.Equal(t, "included:", f["item:acme/b"], "%v", f)
	require.Equal(t, "excluded:budget", f["item:acme/c"], "the budget fits two: %v", f)

	abl := w.ablate("acme", sup, orig.ID, packet.Without{Key: "a"})
	f = fates(abl.Records)
	require.Equal(t, "excluded:ablated", f["item:acme/a"])
	require.Equal(t, "included:", f["item:acme/b"])
	require.Equal(t, "included:", f["item:acme/c"], "the freed budget lets c in")
	require.True(t, w.replay("acme", sup, abl.ID).Identical)

	// c was not included: naming it is refused at its pointer.
	fl := w.ablateFails("acme", sup, orig.ID, packet.Without{Key: "b"}, packet.Without{Key: "c"})
	require.Equal(t, "/without/1", fl.Pointer)
	require.Equal(t, "not_included", fl.Code)
}

// TestAblationRefusals: an empty list, an entry naming two things or
// none, a layer without a key, a duplicate, an unknown key; an item hidden
// from the caller's role is refused exactly as an unknown one (same
// pointer, code and detail but for its name), whether it was hidden when
// the packet was made or since; an admin may leave it out. A packet the
// caller may not open is not found.
func TestAblationRefusals(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w.project("acme")
	w.batch("acme", []spec{
		{Key: "open", Content: "Open fact.", Priority: 20},
		{Key: "secret", Content: "Secret fact.", Priority: 10, Roles: hiddenFrom("support")},
		{Key: "later", Content: "Hidden later.", Priority: 5},
	})
	sup := w.reader("support", "acme")
	orig := w.assemble("acme", sup, ctxtype.Request{TargetRole: "support", TokenBudget: 8000})
	require.Contains(t, orig.Rendered, "Hidden later.")
	w.put("acme", spec{Key: "later", Content: "Hidden later.", Priority: 5, Roles: hiddenFrom("support")})

	for _, c := range []struct {
		without []packet.Without
		pointer string
		code    string
	}{
		{nil, "/without", "required"},
		{[]packet.Without{{Key: "open", Request: "task"}}, "/without/0", "one_of"},
		{[]packet.Without{{}}, "/without/0", "one_of"},
		{[]packet.Without{{Request: "criteria", Layer: "project"}}, "/without/0/layer", "enum"},
		{[]packet.Without{{Key: "open", Layer: "both"}}, "/without/0/layer", "enum"},
		{[]packet.Without{{Key: strings.Repeat("k", 201)}}, "/without/0/key", "too_long"},
		{[]packet.Without{{Key: "open"}, {Key: "open"}}, "/without/1", "duplicate"},
		{[]packet.Without{{Request: "plan"}}, "/without/0", "not_included"},
		{[]packet.Without{{Handoff: "hnd_nope"}}, "/without/0", "not_included"},
	} {
		f := w.ablateFails("acme", sup, orig.ID, c.without...)
		require.Equal(t, c.pointer, f.Pointer, "%+v", c.without)
		require.Equal(t, c.code, f.Code, "%+v", c.without)
	}
	unknown := w.ablateFails("acme", sup, orig.ID, packet.Without{Key: "nosuch"})
	for _, hidden := range []string{"secret", "later"} {
		f := w.ablateFails("acme", sup, orig.ID, packet.Without{Key: hidden})
		require.Equal(t, unknown.Pointer, f.Pointer)
		require.Equal(t, unknown.Code, f.Code)
		require.Equal(t, unknown.Detail, strings.ReplaceAll(f.Detail, hidden, "nosuch"), "hidden looks exactly like not included")
	}
	abl := w.ablate("acme", w.admin, orig.ID, packet.Without{Key: "later"})
	require.NotContains(t, abl.Rendered, "Hidden later.")

	other := w.reader("billing", "acme")
	_, err := w.svc.Packets.Ablate(t.Context(), other, "acme", orig.ID, []packet.Without{{Key: "open"}})
	require.ErrorIs(t, err, packet.ErrNotFound, "another role's packet is not found")
	_, err = w.svc.Packets.Ablate(t.Context(), sup, "acme", "ctxpkt_nosuch", []packet.Without{{Key: "open"}})
	require.ErrorIs(t, err, packet.ErrNotFound)
}
