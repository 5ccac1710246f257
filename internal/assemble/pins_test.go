package assemble

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
)

// pinWorld holds an item of every fate a pin can meet: visible, hidden
// from the role, outside its validity window, deleted, only in _shared,
// hidden in the project but visible in _shared, and a template whose
// placeholder has no value.
func pinWorld() []*ctxtype.Version {
	past := t0.Add(-time.Minute)
	return []*ctxtype.Version{
		ver("acme", "known", "A visible item.", func(v *ctxtype.Version) { v.Trigger = ctxtype.Trigger{PinnedOnly: true} }),
		ver("acme", "hidden", "The launch is on Friday.", func(v *ctxtype.Version) {
			v.Roles.HiddenFrom = []string{"implementer"}
		}),
		ver("acme", "expired", "Old news.", func(v *ctxtype.Version) { v.ValidUntil = &past }),
		ver("acme", "deleted", "Gone.", func(v *ctxtype.Version) { v.Deleted = true }),
		ver("_shared", "shared.only", "A shared default.", func(v *ctxtype.Version) { v.Trigger = ctxtype.Trigger{PinnedOnly: true} }),
		ver("acme", "twin", "Hidden here.", func(v *ctxtype.Version) { v.Roles.HiddenFrom = []string{"implementer"} }),
		ver("_shared", "twin", "Visible there.", func(v *ctxtype.Version) { v.Trigger = ctxtype.Trigger{PinnedOnly: true} }),
		ver("acme", "greeting", "Hello {{customer}}.", func(v *ctxtype.Version) { v.Template = true }),
	}
}

// TestUnresolvedPinsAreGaps: a pin that names no item the role may see (a
// missing key, one hidden from the role, one outside its validity window,
// a deleted one) is a gap of the packet, pin_unresolved, in key order,
// each once, the same in both pipelines and whatever the order of the
// pins; a hidden key's gap is exactly a missing key's, and nothing else a
// role sees tells them apart; a pin that finds an item (in the project
// or in _shared) is no gap, even when the item is left out for another
// reason (a template without its value). The kxm text lists the same gaps.
func TestUnresolvedPinsAreGaps(t *testing.T) {
	t.Parallel()
	pins := []string{"zeta.missing", "known", "hidden", "expired", "deleted", "alpha.missing", "shared.only", "twin", "greeting", "known"}
	want := []ctxtype.Gap{
		{Key: "alpha.missing", Reason: GapPinUnresolved}, {Key: "deleted", Reason: GapPinUnresolved},
		{Key: "expired", Reason: GapPinUnresolved}, {Key: "hidden", Reason: GapPinUnresolved},
		{Key: "zeta.missing", Reason: GapPinUnresolved},
	}
	for _, format := range []ctxtype.Format{ctxtype.Markdown, ctxtype.KXM} {
		var texts []string
		for i, ps := range [][]string{pins, reversed(pins)} {
			r := req(func(r *ctxtype.Request) { r.Pins, r.Format, r.TokenBudget = ps, format, 4000 })
			one := run(t, r, cands(pinWorld()...))
			two, _, err := AssembleBounded(context.Background(), Input{Project: "acme", Request: r, Now: t0},
				&MemorySource{Versions: pinWorld(), Narrow: true}, Options{})
			require.NoError(t, err)
			checkInvariants(t, r, two)
			for _, res := range []*Result{one, two} {
				require.Equal(t, want, res.Gaps, "%s, order %d", format, i)
				require.NotNil(t, find(res, "known"))
				require.Equal(t, ctxtype.Included, find(res, "known").Decision)
				require.Equal(t, ctxtype.ReasonTemplateUnresolved, find(res, "greeting").Reason, "found, left out for its own reason")
				// What a role sees of the records (admin-only ones are
				// never shown to it) says nothing of hidden beyond its gap.
				for _, rec := range res.Records {
					if rec.SubjectKey == "hidden" {
						require.True(t, rec.AdminOnly, "the hidden item's record is for admins only")
					}
				}
				texts = append(texts, res.Rendered)
			}
			if format == ctxtype.KXM {
				_, _, lines := kxmBudget(t, two.Rendered)
				require.Equal(t, []string{"pin_unresolved: alpha.missing", "pin_unresolved: deleted", "pin_unresolved: expired",
					"pin_unresolved: hidden", "pin_unresolved: zeta.missing"}, lines)
			}
		}
		for _, text := range texts[1:] {
			require.Equal(t, texts[0], text, "%s: the same bytes whatever the pins' order and the pipeline", format)
		}
	}
	// A packet rendered before Render3 had no such gaps, and replays so.
	r := req(func(r *ctxtype.Request) { r.Pins, r.Format = pins, ctxtype.KXM })
	old, err := Assemble(Input{Project: "acme", Request: r, Candidates: cands(pinWorld()...), Now: t0, Render: Render2})
	require.NoError(t, err)
	require.Empty(t, old.Gaps)
	_, _, lines := kxmBudget(t, old.Rendered)
	require.Empty(t, lines)
}

func reversed(ss []string) []string {
	out := slices.Clone(ss)
	slices.Reverse(out)
	return out
}
