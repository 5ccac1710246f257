package assemble

import (
	"fmt"
	"sort"
	"time"

	"github.com/contextd/contextd/internal/ctxtype"
)

// candidates is the lifecycle stage: tombstones and versions outside their
// validity window drop out without a record (for the packet they do not
// exist), the rest take their layer, and the visible project items are
// noted as the shadows of _shared items of the same key. The order by key
// then project makes every later stage independent of the caller's order.
func (p *pipeline) candidates() {
	for _, c := range p.in.Candidates {
		v := c.Version
		if v.Deleted || !ValidAt(v, p.in.Now) {
			continue
		}
		p.cands = append(p.cands, &cand{v: v, layer: LayerOf(v.Project), relevance: c.Relevance, pinned: p.pins[v.Key]})
		if v.Project != ctxtype.SharedProject && v.Roles.Visible(p.req.TargetRole) {
			p.shadows[v.Key] = v
		}
	}
	for _, v := range p.contextPackets() {
		p.cands = append(p.cands, &cand{v: v, layer: LayerOf(v.Project)})
	}
	sort.SliceStable(p.cands, func(i, j int) bool {
		if p.cands[i].v.Key != p.cands[j].v.Key {
			return p.cands[i].v.Key < p.cands[j].v.Key
		}
		return p.cands[i].v.Project < p.cands[j].v.Project
	})
}

// overrides is the layering stage: a _shared item whose key a visible
// project item holds is left out, whether or not the project item fires.
// The record is admin-only when the role could not have seen the _shared
// item either.
func (p *pipeline) overrides() {
	kept := p.cands[:0]
	for _, c := range p.cands {
		if over, ok := p.shadows[c.v.Key]; ok && c.v.Project == ctxtype.SharedProject {
			p.exclude(c, ctxtype.ReasonOverridden, fmt.Sprintf("overridden by project item %s v%d", over.Key, over.Version),
				!c.v.Roles.Visible(p.req.TargetRole))
			continue
		}
		kept = append(kept, c)
	}
	p.cands = kept
}

// visibility is the role stage: an item the target role may not see is
// left out, and its record is for admins only, so the role cannot learn
// that it exists.
func (p *pipeline) visibility() {
	kept := p.cands[:0]
	for _, c := range p.cands {
		if !c.v.Roles.Visible(p.req.TargetRole) {
			p.exclude(c, ctxtype.ReasonHidden, fmt.Sprintf("not visible to role %q (visible_to %v, hidden_from %v)",
				p.req.TargetRole, c.v.Roles.VisibleTo, c.v.Roles.HiddenFrom), true)
			continue
		}
		kept = append(kept, c)
	}
	p.cands = kept
}

// LayerOf names a project's layer as records do: "shared" or "project".
func LayerOf(project string) string {
	if project == ctxtype.SharedProject {
		return "shared"
	}
	return "project"
}

// ValidAt reports whether t is inside the version's validity window
// [ValidFrom, ValidUntil), which explanations of a stored packet judge at
// the packet's time just as the pipeline did.
func ValidAt(v *ctxtype.Version, t time.Time) bool {
	if v.ValidFrom != nil && t.Before(*v.ValidFrom) {
		return false
	}
	if v.ValidUntil != nil && !t.Before(*v.ValidUntil) {
		return false
	}
	return true
}
