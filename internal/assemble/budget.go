package assemble

import (
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/render"
	"github.com/contextd/contextd/internal/token"
)

// gapInviolable is the gap of a packet whose request parts alone exceed
// the budget: it is still rendered, with no item in it.
const gapInviolable = "budget_exceeded_by_inviolable"

// budget is the estimating stage: on top of the request's own parts, it
// takes the ranked entries in rank order while their block counts (and a
// section's heading with its first entry) fit, skipping any that does not,
// so a smaller later entry still gets in. The render stage then checks the
// estimate against the exact count.
func (p *pipeline) budget() error {
	b, err := p.startBudget()
	if err != nil {
		return err
	}
	for i := range p.ranked {
		if _, err := p.take(b, i); err != nil {
			return err
		}
	}
	return nil
}

// budgeter is the state of the estimating pass: what the entries taken so
// far use and which sections they started. Pipeline 1 runs it over every
// ranked entry; pipeline 2 over the entries it tries, as it meets them.
type budgeter struct {
	used       int
	started    map[string]bool
	envStarted bool
}

// startBudget counts the request's own parts (the text with no entry). If
// they alone exceed the budget, the packet is inviolable: no entry goes in.
func (p *pipeline) startBudget() (*budgeter, error) {
	if p.req.Format == ctxtype.KXM {
		// The kxm text holds its count and its gaps: the unresolved pins,
		// which the request decides, and the line counting the budget's
		// gaps, reserved at its widest with the count.
		p.doc.Used, p.doc.Gaps = kxmReserve, append(p.pinLines(), p.kxmCountGap(kxmReserve, false))
	}
	base, err := p.count(render.Text(render.Render(p.req.Format, p.doc)))
	p.doc.Used, p.doc.Gaps = base, nil
	if err != nil {
		return nil, err
	}
	if base > p.req.TokenBudget {
		p.inviolable = true
		p.gaps = append(p.gaps, ctxtype.Gap{Reason: gapInviolable})
	}
	p.gaps = append(p.gaps, p.pinGaps()...)
	return &budgeter{used: base, started: map[string]bool{}}, nil
}

// take decides ranked entry i: it goes in when its cost fits what is left.
func (p *pipeline) take(b *budgeter, i int) (bool, error) {
	for len(p.included) <= i {
		p.included = append(p.included, false)
	}
	if p.inviolable {
		return false, nil
	}
	budget := p.req.TokenBudget
	c := p.ranked[i]
	cost, extraContra, err := p.price(c, b.started, b.envStarted)
	if err != nil {
		return false, err
	}
	c.needed, c.remaining = cost, budget-b.used
	if b.used+cost > budget {
		return false, nil
	}
	// The winner of a contradiction brings its pair lines when they fit
	// too; when only the winner fits, the fact still goes in and the pair
	// is not listed (the loser's record still says why).
	c.listLosers = extraContra > 0 && b.used+cost+extraContra <= budget
	if !c.listLosers {
		extraContra = 0
	}
	b.used += cost + extraContra
	p.included[i] = true
	b.started[c.section] = true
	if render.IsEnv(c.section) {
		b.envStarted = true
	}
	if extraContra > 0 {
		b.started[render.ActiveContradictions] = true
		b.envStarted = true
	}
	return true, nil
}

// price returns what c would add: its block, with its section's heading
// when the section has not started (and the packet's header, navi's, when
// nothing has), and separately the lines of its
// contradiction pairs, with their heading likewise. It sets c's block cost,
// which its record reports.
func (p *pipeline) price(c *cand, started map[string]bool, envStarted bool) (cost, extraContra int, err error) {
	if cost, err = entryCost(p.req, c); err != nil {
		return 0, 0, err
	}
	c.blockCost = cost
	if !started[c.section] {
		h, err := p.count(render.HeadingCost(p.req.Format, c.section, envStarted))
		if err != nil {
			return 0, 0, err
		}
		cost += h
	}
	if first := render.FirstEntryCost(p.req.Format); first != "" && len(started) == 0 {
		h, err := p.count(first)
		if err != nil {
			return 0, 0, err
		}
		cost += h
	}
	for _, l := range c.losers {
		n, err := p.count(render.ContradictionCost(p.req.Format, p.contradiction(c, l)))
		if err != nil {
			return 0, 0, err
		}
		extraContra += n
	}
	if extraContra > 0 && !started[render.ActiveContradictions] {
		h, err := p.count(render.HeadingCost(p.req.Format, render.ActiveContradictions, envStarted || render.IsEnv(c.section)))
		if err != nil {
			return 0, 0, err
		}
		extraContra += h
	}
	return cost, extraContra, nil
}

// storedCount reports whether an entry's block count was stored with its
// version: markdown, untemplated, counted under the request's tokenizer.
func storedCount(req *ctxtype.Request, c *cand) bool {
	return req.Format == ctxtype.Markdown && !c.v.Template && storedBlock(req, c) > 0
}

// entryCost is the tokens of an entry's block: the count stored with the
// version for untemplated markdown, else counted now.
func entryCost(req *ctxtype.Request, c *cand) (int, error) {
	if storedCount(req, c) {
		return storedBlock(req, c), nil
	}
	e := render.Entry{Key: c.v.Key, Version: c.v.Version, Source: c.v.Source, Priority: c.v.Priority, Title: c.title, Content: c.content, V: c.v}
	return token.Count(req.Tokenizer, render.EntryCost(req.Format, e))
}

// storedBlock is the block count stored with c's version under the
// request's tokenizer.
func storedBlock(req *ctxtype.Request, c *cand) int {
	if req.Tokenizer == token.Cl100kBase {
		return c.v.BlockTokens.Cl100k
	}
	return c.v.BlockTokens.O200k
}
