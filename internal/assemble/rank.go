package assemble

import (
	"cmp"
	"slices"
)

// rank is the ordering stage: the budget takes entries in this order, so
// it decides what a tight budget keeps.
func (p *pipeline) rank() { slices.SortFunc(p.ranked, byRank) }

// byRank is the packet's total order: pins, authority, priority,
// confidence, relevance score, the more recently written version, key.
func byRank(a, b *cand) int {
	pin := func(c *cand) int {
		if c.pinned {
			return 1
		}
		return 0
	}
	rel := func(c *cand) float64 {
		if c.relevance == nil {
			return -1
		}
		return *c.relevance
	}
	return cmp.Or(
		-cmp.Compare(pin(a), pin(b)),
		-cmp.Compare(authorityRank[a.v.Authority], authorityRank[b.v.Authority]),
		-cmp.Compare(a.v.Priority, b.v.Priority),
		-cmp.Compare(confidenceRank[a.v.Confidence], confidenceRank[b.v.Confidence]),
		-cmp.Compare(rel(a), rel(b)),
		-a.v.CreatedAt.Compare(b.v.CreatedAt),
		cmp.Compare(a.v.Key, b.v.Key),
		cmp.Compare(a.v.Project, b.v.Project),
	)
}
