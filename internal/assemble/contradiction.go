package assemble

import (
	"cmp"
	"slices"
	"sort"

	"github.com/contextd/contextd/internal/render"
)

// contradictions is the state-key stage: of the candidates that claim one
// state key with different content, only the strongest goes on to ranking;
// the others become its losers, recorded as contradicted and listed under
// Active Contradictions when that fits. The same content twice is
// agreement, not a contradiction.
func (p *pipeline) contradictions() {
	byState := map[string][]*cand{}
	var stateKeys []string
	for _, c := range p.cands {
		if sk := c.v.StateKey; sk != "" {
			if _, ok := byState[sk]; !ok {
				stateKeys = append(stateKeys, sk)
			}
			byState[sk] = append(byState[sk], c)
		}
	}
	sort.Strings(stateKeys)
	for _, sk := range stateKeys {
		group := byState[sk]
		if len(group) < 2 {
			continue
		}
		slices.SortFunc(group, stronger)
		winner := group[0]
		for _, c := range group[1:] {
			if c.content == winner.content {
				continue
			}
			c.loserOf = winner
			winner.losers = append(winner.losers, c)
		}
	}
	for _, c := range p.cands {
		if c.loserOf != nil {
			p.losers = append(p.losers, c)
		} else {
			p.ranked = append(p.ranked, c)
		}
	}
}

var authorityRank = map[string]int{"policy": 4, "instruction": 3, "evidence": 2, "hypothesis": 1}
var confidenceRank = map[string]int{"verified": 3, "probable": 2, "uncertain": 1}

// stronger orders contenders for one state key: authority, confidence,
// priority, then the newer version; key and project make it total.
func stronger(a, b *cand) int {
	return cmp.Or(
		-cmp.Compare(authorityRank[a.v.Authority], authorityRank[b.v.Authority]),
		-cmp.Compare(confidenceRank[a.v.Confidence], confidenceRank[b.v.Confidence]),
		-cmp.Compare(a.v.Priority, b.v.Priority),
		-a.v.CreatedAt.Compare(b.v.CreatedAt),
		cmp.Compare(a.v.Key, b.v.Key),
		cmp.Compare(a.v.Project, b.v.Project),
	)
}

// contradiction describes the pair of a winner and one loser; its line
// belongs to the loser's record, which says why the loser is out.
// From Render2 on the line names the facts, not only their keys.
func (p *pipeline) contradiction(w, l *cand) render.Contradiction {
	return render.Contradiction{Ref: l.ref, StateKey: l.v.StateKey, Facts: p.in.render() >= Render2,
		Kept: render.Entry{Key: w.v.Key, Version: w.v.Version, Content: w.content}, KeptAuthority: w.v.Authority,
		Dropped: render.Entry{Key: l.v.Key, Version: l.v.Version, Content: l.content, V: l.v}, DroppedAuthority: l.v.Authority}
}
