package assemble

import "github.com/contextd/contextd/internal/ctxtype"

// A request with an ablation (ctxtype.Ablation) is a counterfactual of an
// earlier packet, assembled on that packet's snapshot at its time: every
// entry it names is left out, recorded excluded with reason ablated, and
// nothing else changes but what the budget it frees lets in. An item (or
// context packet) is left out where it would have been ranked, after
// overrides, visibility, templates and contradictions: a project item left
// out still overrides its _shared namesake, and a winner left out keeps
// its losers contradicted, so the counterfactual removes that entry alone.
// A request part or predecessor is left out of the document (requestParts).
// Pipeline 2 (AssembleBounded) honours it; every ablation is made by it.

// ablatedDetail is the detail of an ablated entry's record.
func ablatedDetail(req *ctxtype.Request) string {
	return "left out of this counterfactual of packet " + req.Ablation.Of
}

// ablated reports whether the request's ablation leaves c out, and if so
// records it.
func (p *pipeline) ablated(c *cand) bool {
	kind, project := ctxtype.SubjectItem, c.v.Project
	if IsContextPacket(c.v.Key) {
		kind, project = ctxtype.SubjectRequest, ""
	}
	if !p.req.Ablation.Leaves(kind, project, c.v.Key) {
		return false
	}
	p.exclude(c, ctxtype.ReasonAblated, ablatedDetail(p.req), false)
	return true
}
