package assemble

import (
	"maps"
	"slices"

	"github.com/contextd/contextd/internal/ctxtype"
)

// GapPinUnresolved is the gap of a pin that names no item the packet's
// role may see: no live version of the key in the project or in _shared
// is valid at the packet's time and visible to the role. A key that does
// not exist and one hidden from the role give the same gap, so the gap
// tells the role nothing about what it may not see. A pinned item that
// exists and is left out for another reason (its template, a
// contradiction, the budget) has a record that says why, and no such gap.
const GapPinUnresolved = "pin_unresolved"

// resolvePins notes the request's pins that name nothing the role may
// see, each once, in key order: resolved says whether a version of the
// key is live, valid and visible. From Render3 on; a packet rendered
// before keeps its gaps as they were.
func (p *pipeline) resolvePins(resolved func(key string) bool) {
	if p.in.render() < Render3 {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(p.pins)) {
		if !resolved(k) {
			p.unresolvedPins = append(p.unresolvedPins, k)
		}
	}
}

// resolves reports whether v resolves a pin of its key for the packet.
func (p *pipeline) resolves(v *ctxtype.Version) bool {
	return !v.Deleted && ValidAt(v, p.in.Now) && v.Roles.Visible(p.req.TargetRole)
}

// pinsOfCandidates resolves the pins from pipeline 1's candidates, which
// hold every current version of the pinned keys.
func (p *pipeline) pinsOfCandidates() {
	seen := map[string]bool{}
	for _, c := range p.in.Candidates {
		if p.pins[c.Version.Key] && p.resolves(c.Version) {
			seen[c.Version.Key] = true
		}
	}
	p.resolvePins(func(k string) bool { return seen[k] })
}

// pinsOfRegistry resolves the pins from what pipeline 2's small lanes
// read: every live version of a pinned key, registered when valid.
func (b *bounded) pinsOfRegistry() {
	seen := map[string]bool{}
	for _, c := range b.reg {
		if b.p.pins[c.v.Key] && b.p.resolves(c.v) {
			seen[c.v.Key] = true
		}
	}
	b.p.resolvePins(func(k string) bool { return seen[k] })
}

// pinGaps are the unresolved pins as gaps of the packet.
func (p *pipeline) pinGaps() []ctxtype.Gap {
	out := make([]ctxtype.Gap, len(p.unresolvedPins))
	for i, k := range p.unresolvedPins {
		out[i] = ctxtype.Gap{Key: k, Reason: GapPinUnresolved}
	}
	return out
}

// pinLines are the unresolved pins as the kxm format's unresolvedGaps
// write them.
func (p *pipeline) pinLines() []string {
	out := make([]string, len(p.unresolvedPins))
	for i, k := range p.unresolvedPins {
		out[i] = GapPinUnresolved + ": " + k
	}
	return out
}
