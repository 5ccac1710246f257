package packet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/assemble"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/handoff"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// WhyAnswer explains one item's fate in one packet.
type WhyAnswer struct {
	Decision string // included, excluded, not_candidate
	Record   *ctxtype.Record
	Reason   string
	Detail   string
	Item     *ctxtype.Version // the version as it was then; nil if it did not exist
	// Cutoff is the packet's cutoff, for a candidate past it.
	Cutoff *assemble.Cutoff
	// Redaction, when that version's content was redacted since: who, when
	// and why.
	Redaction *store.Redaction
	// ContextPacket is the request's context packet asked about, as sent.
	ContextPacket json.RawMessage
	// Policy, for an item the role's policy left out (reason
	// role_policy), names the policy and the layer that decided.
	Policy *PolicyDecision
	// Pending is the item's pending proposals now, and who may promote
	// them; nil when it has none (whyproposals.go).
	Pending *item.Pending
}

// PolicyDecision is the role policy that left an item out of a packet:
// its role, the member that decided (kinds or max_per_section) and the
// layer that set that member (_shared or the project), as the packet
// stored them.
type PolicyDecision struct{ Role, Member, Layer string }

// policyDecision is the PolicyDecision of an answer with reason
// role_policy about version v, nil for any other.
func policyDecision(p *Packet, reason string, v *ctxtype.Version) *PolicyDecision {
	pol := p.Request.RolePolicy
	if reason != ctxtype.ReasonRolePolicy || pol == nil {
		return nil
	}
	m := ctxtype.MemberMaxPerSection
	if v != nil && !pol.AllowsKind(v.Kind) {
		m = ctxtype.MemberKinds
	}
	return &PolicyDecision{Role: pol.Role, Member: m, Layer: pol.Layers[m]}
}

// Why answers "why did (or didn't) this packet contain this item?". The
// answer for an item the packet recorded comes from its record; for any
// other item it is worked out now from the stored request and snapshot.
func (s *Service) Why(ctx context.Context, agent *auth.Agent, proj, id, key, layer string) (*WhyAnswer, error) {
	a, err := s.why(ctx, agent, proj, id, key, layer)
	if err == nil {
		err = s.withPending(ctx, agent, proj, key, a) // whyproposals.go
	}
	if err != nil || a.Item == nil {
		return a, err
	}
	rs, err := s.store.RedactionsOf(ctx, a.Item.Project, []string{a.Item.Key}, []int32{int32(a.Item.Version)})
	if err != nil {
		return nil, err
	}
	if len(rs) > 0 {
		a.Redaction = &rs[0]
		a.Detail = strings.TrimSpace(a.Detail + " The version's content was " + redactedText(rs[0]) + ".")
	}
	return a, nil
}

// why reads the packet and the item's versions as its snapshot saw them in
// one read of history (the replica's, when one serves: both never change,
// and are read through the same db so that they agree), then explains.
func (s *Service) why(ctx context.Context, agent *auth.Agent, proj, id, key, layer string) (*WhyAnswer, error) {
	var rows []*ctxtype.Version
	p, err := s.read(ctx, agent, proj, id, func(db store.DB, p *Packet) error {
		if !item.ValidKey(key) {
			return validation.One("item", "format", "item must be an item key")
		}
		if layer != "" && layer != "project" && layer != "shared" {
			return validation.One("layer", "enum", "layer must be project or shared")
		}
		var err error
		rows, err = db.SnapshotVersions(ctx, []string{proj, ctxtype.SharedProject}, key, p.Snapshot)
		return err
	})
	if err != nil {
		return nil, err
	}
	then := map[string]*ctxtype.Version{}
	for _, r := range rows {
		then[r.Project] = r
	}
	// An item the caller may not see now is hidden here, whatever it was
	// when the packet was made.
	visibleNow := func(layer string) (bool, error) {
		if agent.SeesAllRoles() {
			return true, nil
		}
		cur, err := s.store.ItemVersionCurrent(ctx, layer, key)
		if err != nil {
			if errors.Is(err, fault.ErrNotFound) {
				return true, nil
			}
			return false, err
		}
		return cur.Roles.Visible(agent.Role), nil
	}
	visible := func(v *ctxtype.Version) bool {
		if !agent.SeesAllRoles() && !v.Roles.Visible(agent.Role) {
			return false
		}
		ok, err := visibleNow(v.Project)
		return ok && err == nil
	}

	// An item the caller may not see (then, or now) does not exist for it:
	// it is answered exactly as a key that never existed, so that why
	// tells a hidden key from a free one no more than a packet does.
	for layer, v := range then {
		if !visible(v) {
			delete(then, layer)
		}
	}
	didNotExist := &WhyAnswer{Decision: "not_candidate", Reason: "did_not_exist",
		Detail: fmt.Sprintf("no item %q existed in %s or _shared when the packet was assembled", key, proj)}

	// The item asked about is the project's unless the layer says shared,
	// or the project had none the caller may see (or a tombstone where
	// _shared had one): then the _shared item is the one that could reach
	// the packet.
	target := proj
	pv, sv := then[proj], then[ctxtype.SharedProject]
	if layer == "shared" || pv == nil || (pv.Deleted && sv != nil && !sv.Deleted) {
		target = ctxtype.SharedProject
	}
	if rec := recordOf(p, key, target); rec != nil {
		v, err := s.store.ItemVersionGet(ctx, rec.SubjectProject, key, rec.SubjectVersion)
		if err != nil {
			return nil, err
		}
		if !visible(v) {
			return didNotExist, nil
		}
		return &WhyAnswer{Decision: rec.Decision, Record: rec, Reason: rec.Reason, Detail: rec.Detail, Item: v,
			Policy: policyDecision(p, rec.Reason, v)}, nil
	}

	// Not recorded: past the budget's cutoff, or it was no candidate, or
	// it did not fire.
	v := then[target]
	if ans, err := s.whyUntried(ctx, proj, p, key, target, v); err != nil || ans != nil {
		return ans, err
	}
	if v == nil {
		return didNotExist, nil
	}
	return s.whyNotCandidate(ctx, agent, p, v)
}

// whyNotCandidate explains an item that was in the snapshot but not a
// candidate of the packet: a tombstone, outside its window, or its trigger
// did not fire.
func (s *Service) whyNotCandidate(ctx context.Context, agent *auth.Agent, p *Packet, v *ctxtype.Version) (*WhyAnswer, error) {
	ans := &WhyAnswer{Decision: "not_candidate", Item: v}
	switch {
	case v.Deleted:
		ans.Reason, ans.Detail = "tombstoned", fmt.Sprintf("version %d, current then, is a tombstone", v.Version)+retiredBy(v.Metadata)
	case !assemble.ValidAt(v, p.assembledAt()):
		ans.Reason, ans.Detail = "not_valid", fmt.Sprintf("its validity window %s does not hold the packet's time %s", window(v), p.assembledAt().Format(time.RFC3339Nano))
	case !agent.SeesAllRoles() || v.Roles.Visible(p.TargetRole):
		ans.Reason, ans.Detail = "not_triggered", assemble.NotTriggered(p.Request, v)
		if v.Trigger.Relevance && strings.TrimSpace(p.Request.Query) != "" {
			matched, err := s.store.ItemVersionMatches(ctx, v, p.Request.Query)
			if err != nil {
				return nil, err
			}
			if !matched {
				ans.Detail = fmt.Sprintf("trigger relevance: the query %q shares no word with it (after english stemming and stop words)", p.Request.Query)
			}
		}
	default:
		// Only an admin gets here: hidden from the packet's role, and its
		// trigger did not fire either.
		ans.Reason, ans.Detail = "not_triggered", assemble.NotTriggered(p.Request, v)+fmt.Sprintf("; it is also hidden from role %q", p.TargetRole)
	}
	return ans, nil
}

// whyUntried explains an item a pipeline 2 packet has no record of when
// its budget stopped before the end: the pipeline runs again on the
// packet's snapshot, goes on past the cutoff without trying the budget,
// and says what would have excluded the item first, or that it ranked
// after the cutoff. Nil when the item was no candidate at all.
func (s *Service) whyUntried(ctx context.Context, proj string, p *Packet, key, explain string, v *ctxtype.Version) (*WhyAnswer, error) {
	if p.Pipeline < assemble.Pipeline2 || p.Cutoff == nil || v == nil || v.Deleted {
		return nil, nil
	}
	// From the primary: the packet may have been read from it (the replica
	// had not replayed it), and a replica behind it would lack versions.
	src, err := s.snapshotSource(ctx, s.store.DB, proj, p)
	if err != nil {
		return nil, err
	}
	in := assemble.Input{Project: proj, PacketID: p.ID, Request: p.Request, Now: p.assembledAt(), Predecessors: p.Predecessors, Render: p.RenderVersion}
	_, why, err := assemble.AssembleBounded(ctx, in, src, assemble.Options{ExplainLayer: explain, ExplainKey: key, Stages: s.stages})
	if err != nil || why == nil {
		return nil, err
	}
	rec := &ctxtype.Record{SubjectKind: ctxtype.SubjectItem, SubjectProject: explain, SubjectKey: key, SubjectVersion: v.Version,
		Decision: ctxtype.Excluded, Reason: why.Reason, Detail: why.Detail, Rank: why.Rank, Rule: why.Rule,
		Layer: assemble.LayerOf(explain), Kind: v.Kind, Source: v.Source}
	return &WhyAnswer{Decision: ctxtype.Excluded, Record: rec, Reason: why.Reason, Detail: why.Detail, Item: v, Cutoff: p.Cutoff,
		Policy: policyDecision(p, why.Reason, v)}, nil
}

// recordOf is the packet's record of an item of a layer.
func recordOf(p *Packet, key, layer string) *ctxtype.Record {
	for i := range p.Records {
		r := &p.Records[i]
		if r.SubjectKind == ctxtype.SubjectItem && r.SubjectKey == key && r.SubjectProject == layer {
			return r
		}
	}
	return nil
}

func window(v *ctxtype.Version) string {
	f, u := "-∞", "+∞"
	if v.ValidFrom != nil {
		f = v.ValidFrom.Format(time.RFC3339Nano)
	}
	if v.ValidUntil != nil {
		u = v.ValidUntil.Format(time.RFC3339Nano)
	}
	return "[" + f + ", " + u + ")"
}

// WhyHandoff explains a handoff's place in a packet: a predecessor the
// request named (with its record and span), or none.
func (s *Service) WhyHandoff(ctx context.Context, agent *auth.Agent, proj, id, handoffID string) (*WhyAnswer, *handoff.Handoff, error) {
	p, err := s.Get(ctx, agent, proj, id)
	if err != nil {
		return nil, nil, err
	}
	d, err := s.handoffs.Get(ctx, agent, proj, handoffID)
	if err != nil {
		return nil, nil, err
	}
	for i := range p.Records {
		r := &p.Records[i]
		if r.SubjectKind == ctxtype.SubjectHandoff && r.SubjectKey == handoffID {
			// The handoff as the packet saw it: its manifest never changes,
			// its status may have since.
			then := *d.Handoff
			for _, pred := range p.Predecessors {
				if pred.ID == handoffID && pred.Status != then.Status {
					then.Status = pred.Status
					if pred.Status == handoff.Pending {
						then.StatusReason, then.SupersededBy, then.UpdatedAt = "", "", then.CreatedAt
					}
				}
			}
			return &WhyAnswer{Decision: r.Decision, Record: r, Detail: "the request named it as a predecessor; predecessors are never dropped for budget"}, &then, nil
		}
	}
	return &WhyAnswer{Decision: "not_candidate", Reason: "not_a_predecessor",
		Detail: "the request did not name this handoff among its predecessors"}, d.Handoff, nil
}

// WhyContextPacket answers for the request's i-th context packet: its
// record (a part of the request, ranked and budgeted like an item) and the
// packet as the request sent it. An index the request did not have is 422
// on the parameter.
func (s *Service) WhyContextPacket(ctx context.Context, agent *auth.Agent, proj, id string, i int) (*WhyAnswer, error) {
	p, err := s.Get(ctx, agent, proj, id)
	if err != nil {
		return nil, err
	}
	if i < 0 || i >= len(p.Request.ContextPackets) {
		return nil, validation.One("context_packet", "range", "the packet's request had %d context packets; context_packet %d is not one of them", len(p.Request.ContextPackets), i)
	}
	key := assemble.ContextPacketKey(i)
	for j := range p.Records {
		r := &p.Records[j]
		if r.SubjectKind == ctxtype.SubjectRequest && r.SubjectKey == key {
			return &WhyAnswer{Decision: r.Decision, Record: r, Reason: r.Reason, Detail: r.Detail, ContextPacket: p.Request.ContextPackets[i]}, nil
		}
	}
	// Past pipeline 2's cutoff a candidate has no record: it was ranked
	// after the last one the budget tried.
	return &WhyAnswer{Decision: ctxtype.Excluded, Reason: assemble.ReasonBudgetCutoff, Cutoff: p.Cutoff,
		Detail: "ranked after the last candidate the budget tried", ContextPacket: p.Request.ContextPackets[i]}, nil
}

// retiredBy says, for a tombstone an import wrote (item.Service.ImportTx),
// that an import retired the item and with which KXM status; "" otherwise.
func retiredBy(meta json.RawMessage) string {
	var m struct {
		RetiredBy string `json:"retired_by"`
		KXM       struct {
			Status string `json:"status"`
		} `json:"kxm"`
	}
	if json.Unmarshal(meta, &m) != nil || m.RetiredBy != "import" {
		return ""
	}
	if m.KXM.Status != "" {
		return fmt.Sprintf(": an import retired it (KXM status %s)", m.KXM.Status)
	}
	return ": an import retired it"
}
