package assemble

import (
	"context"
	"fmt"
	"github.com/contextd/contextd/internal/ctxtype"
	"slices"
	"strings"
)

// TryAfterMiss is how many candidates the budget still tries, in rank
// order, after the first one that did not fit; every candidate after them
// is excluded with reason budget_cutoff without being tried.
const TryAfterMiss = 32

// MaxGaps is how many budget exclusions unresolved_gaps lists (the highest
// ranked, after the inviolable gap when there is one); GapsMore counts the
// rest.
const MaxGaps = 20

// ReasonBudgetCutoff means the candidate ranked after the last one the
// budget tried: it was counted, not tried.
const ReasonBudgetCutoff = "budget_cutoff"

// Cutoff says where the budget stopped trying: Rank is the rank the first
// untried candidate would have had, Headroom what the packet left unused,
// Count how many candidates were not tried.
type Cutoff struct {
	Rank     int `json:"rank"`
	Headroom int `json:"headroom"`
	Count    int `json:"count"`
}

// Explanation is the fate of one candidate the budget did not try (why?
// for an item a pipeline 2 packet has no record of).
type Explanation struct {
	// Reason is budget_cutoff, or the reason of the stage that would have
	// excluded it first (overridden, hidden, template_unresolved,
	// contradicted).
	Reason string
	Detail string
	// Rule is the rule that fired it.
	Rule string
	// Rank is its place in the packet's order had the budget gone on:
	// the cutoff's rank plus the visible untried candidates before it.
	Rank int
}

// maxRounds bounds how often the budget's window is moved after the exact
// count changed where the first exclusion is.
const maxRounds = 8

// tryAndRender tries candidates in rank order until TryAfterMiss of them
// followed the first that did not fit, then settles the records' order and
// renders with the exact count. The window counts from the first exclusion
// of the packet as rendered: when the exact count lets in an entry the
// estimate had left out (or leaves out one it had let in), the first
// exclusion moves, and so many more candidates are tried as keep
// TryAfterMiss after it, and the packet is rendered again.
func (b *bounded) tryAndRender(ctx context.Context, bud *budgeter) error {
	p := b.p
	base := len(p.recs)
	first := -1 // index in p.ranked of the first exclusion
	for round := 0; ; round++ {
		for first < 0 || len(p.ranked)-1-first < TryAfterMiss {
			c, err := b.next(ctx)
			if err != nil {
				return err
			}
			if c == nil {
				break
			}
			ok, err := b.admit(ctx, c)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			c.section = sectionOf(c.v)
			if p.sectionLeftOut(c) {
				continue
			}
			p.ranked = append(p.ranked, c)
			if err := b.costable(ctx, c); err != nil {
				return err
			}
			took, err := p.take(bud, len(p.ranked)-1)
			if err != nil {
				return err
			}
			if !took && first < 0 {
				first = len(p.ranked) - 1
			}
		}
		if err := b.renderTried(ctx, base); err != nil {
			return err
		}
		rendered := slices.Index(p.included, false)
		if rendered == first || round == maxRounds || (rendered < 0 && b.exhausted()) {
			return nil
		}
		first = rendered
		bud.used = p.used
	}
}

// exhausted reports whether every lane and the small lanes are read out.
func (b *bounded) exhausted() bool {
	if b.smallNext < len(b.small) {
		return false
	}
	for _, s := range b.streams {
		if !s.done || len(s.buf) > 0 {
			return false
		}
	}
	return true
}

// renderTried settles the records' order for what was tried (records
// after base are made again, as more may have been tried since the last
// render), reads the text of the tried entries and renders with the exact
// count.
func (b *bounded) renderTried(ctx context.Context, base int) error {
	p := b.p
	slices.SortStableFunc(p.losers, func(x, y *cand) int {
		return strings.Compare(x.v.Key+"\x00"+x.v.Project, y.v.Key+"\x00"+y.v.Project)
	})
	p.recs = p.recs[:base]
	p.refCand, p.pieceCounts = nil, nil
	p.itemRecords()
	if err := b.texts(ctx, p.ranked); err != nil {
		return err
	}
	return p.render()
}

// capGaps keeps the inviolable gap and the MaxGaps highest-ranked budget
// exclusions, and returns how many it left out.
func capGaps(res *Result) int {
	var kept []ctxtype.Gap
	n, more := 0, 0
	for _, g := range res.Gaps {
		if g.Reason != ctxtype.ReasonBudget {
			kept = append(kept, g)
			continue
		}
		if n == MaxGaps {
			more++
			continue
		}
		n++
		kept = append(kept, g)
	}
	res.Gaps = kept
	return more
}

// cutoff counts the candidates the budget did not try: the visible
// always-on items after each stream's position that no lane already
// handled, and the small lanes' candidates not met. Nil when there are none.
func (b *bounded) cutoff(ctx context.Context) (*Cutoff, error) {
	role, now := b.p.req.TargetRole, b.p.in.Now
	var open []*stream
	var qs []LaneQuery
	for _, s := range b.streams {
		if !s.done || len(s.buf) > 0 {
			open = append(open, s)
			qs = append(qs, b.query(s, s.cursor))
		}
	}
	counts, err := countsAfter(ctx, b.src, qs, role, now, b.firesAlone)
	if err != nil {
		return nil, err
	}
	n := 0
	for i, s := range open {
		n += counts[i]
		for _, c := range b.reg {
			if c.v.Project == s.layer && (c.handled || c.small) && b.inLane(s, c.v) &&
				ValidAt(c.v, now) && c.v.Roles.Visible(role) && PosOf(c.v).Compare(s.cursor) > 0 {
				n--
			}
		}
	}
	for _, c := range b.small[b.smallNext:] {
		if !c.met && !c.handled && c.v.Roles.Visible(role) {
			n++
		}
	}
	if n == 0 {
		return nil, nil
	}
	return &Cutoff{Rank: len(b.p.ranked) + 1, Count: n}, nil
}

// explain goes on past the cutoff without trying the budget until it meets
// the candidate to explain: the stage that would have excluded it first,
// or budget_cutoff with its rank among the visible untried candidates.
func (b *bounded) explain(ctx context.Context, cutoffRank int) (*Explanation, error) {
	role, rank := b.p.req.TargetRole, cutoffRank
	for {
		c, err := b.next(ctx)
		if err != nil || c == nil {
			return nil, err
		}
		target := c.v.Key == b.opt.ExplainKey && c.v.Project == b.opt.ExplainLayer
		if !target {
			if c.v.Roles.Visible(role) && !c.handled {
				rank++
			}
			continue
		}
		before := len(b.p.excluded)
		// An untried candidate has the rank it was counted at; a hidden one
		// is not counted and has none.
		if c.handled && c.loserOf != nil {
			return &Explanation{Reason: ctxtype.ReasonContradicted, Rank: rank, Rule: c.rule,
				Detail: fmt.Sprintf("contradicted by %s v%d on state_key %q", c.loserOf.v.Key, c.loserOf.v.Version, c.v.StateKey)}, nil
		}
		ok, err := b.admit(ctx, c)
		if err != nil {
			return nil, err
		}
		switch {
		case c.loserOf != nil:
			return &Explanation{Reason: ctxtype.ReasonContradicted, Rank: rank, Rule: c.rule,
				Detail: fmt.Sprintf("contradicted by %s v%d on state_key %q", c.loserOf.v.Key, c.loserOf.v.Version, c.v.StateKey)}, nil
		case !ok && len(b.p.excluded) > before:
			r := b.p.excluded[len(b.p.excluded)-1]
			b.p.excluded = b.p.excluded[:before]
			if r.Reason == ctxtype.ReasonHidden {
				rank = 0
			}
			return &Explanation{Reason: r.Reason, Detail: r.Detail, Rank: rank, Rule: c.rule}, nil
		}
		if e := b.sectionExplained(c, rank); ok && e != nil {
			return e, nil
		}
		return &Explanation{Reason: ReasonBudgetCutoff, Rank: rank, Rule: c.rule,
			Detail: fmt.Sprintf("rank %d, at or after the cutoff at rank %d: the budget tried %d candidates after the first that did not fit, and no later one",
				rank, cutoffRank, TryAfterMiss)}, nil
	}
}
