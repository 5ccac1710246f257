package assemble

import "github.com/contextd/contextd/internal/ctxtype"

// The role's policy (ctxtype.AppliedPolicy, stored with the request) is a
// stage of pipeline 2: an item of a kind the policy leaves out is
// excluded with reason role_policy right after visibility (a hidden item
// stays hidden: its record is for admins only), and an item whose section
// already holds the most entries the policy allows is excluded when it
// comes to be ranked. Both are exclusions like hidden ones: recorded while
// the budget tries candidates, counted with the cutoff past it, and
// explained on demand there. The request's own context packets are parts
// of the request, not items: the policy leaves them be. Pipeline 1, which
// only replays packets made before policies existed, has no such stage.

// kindLeftOut excludes c, with its record, when the role's policy does not
// let its kind in, and reports whether it did.
func (p *pipeline) kindLeftOut(c *cand) bool {
	pol := p.req.RolePolicy
	if IsContextPacket(c.v.Key) || pol.AllowsKind(c.v.Kind) {
		return false
	}
	p.exclude(c, ctxtype.ReasonRolePolicy, pol.KindDetail(c.v.Kind), false)
	c.handled = true
	return true
}

// sectionFull reports whether the role's policy caps c's section and the
// included entries of that section are as many as the cap already.
func (p *pipeline) sectionFull(c *cand) (int, bool) {
	limit, ok := p.req.RolePolicy.SectionCap(c.section)
	if !ok || IsContextPacket(c.v.Key) {
		return 0, false
	}
	n := 0
	for i, r := range p.ranked {
		if i < len(p.included) && p.included[i] && r.section == c.section && !IsContextPacket(r.v.Key) {
			n++
		}
	}
	return limit, n >= limit
}

// sectionLeftOut excludes c, with its record, when its section is full
// (sectionFull), and reports whether it did.
func (p *pipeline) sectionLeftOut(c *cand) bool {
	limit, full := p.sectionFull(c)
	if !full {
		return false
	}
	p.exclude(c, ctxtype.ReasonRolePolicy, p.req.RolePolicy.SectionDetail(c.section, limit), false)
	c.handled = true
	return true
}

// sectionExplained is the explanation of a candidate the budget never
// tried whose section the role's policy had filled (explain), or nil.
func (b *bounded) sectionExplained(c *cand, rank int) *Explanation {
	c.section = sectionOf(c.v)
	limit, full := b.p.sectionFull(c)
	if !full {
		return nil
	}
	return &Explanation{Reason: ctxtype.ReasonRolePolicy, Detail: b.p.req.RolePolicy.SectionDetail(c.section, limit), Rank: rank, Rule: c.rule}
}
