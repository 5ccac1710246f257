package assemble

import "github.com/contextd/contextd/internal/render"

// maxFillTries and fillSlack bound the second pass of the budget: at most
// this many left-out entries are tried against the exact count, and only
// those whose estimate exceeds the headroom by at most fillSlack tokens.
const (
	maxFillTries = 8
	fillSlack    = 4
)

// render is the exact stage. The sum of block counts is an estimate (a
// block's count alone can differ by a token or two from its count in
// context); the whole text, counted once, is the truth. Over budget, it
// drops the lowest-ranked entry until the text fits; under budget, it
// tries the entries whose estimate only just missed.
func (p *pipeline) render() error {
	var err error
	if p.pieces, p.text, p.used, err = p.renderIncluded(); err != nil {
		return err
	}
	for p.used > p.req.TokenBudget {
		last := -1
		for i := range p.ranked {
			if p.included[i] {
				last = i
			}
		}
		if last < 0 {
			break
		}
		p.included[last] = false
		if p.pieces, p.text, p.used, err = p.renderIncluded(); err != nil {
			return err
		}
	}
	if p.inviolable {
		return nil
	}
	return p.refill()
}

// refill tries left-out entries, by rank, against the exact count. Bounded,
// so a packet is never re-counted more than a few times.
func (p *pipeline) refill() error {
	tries := 0
	for i, c := range p.ranked {
		if p.included[i] || tries == maxFillTries {
			continue
		}
		if c.blockCost > p.req.TokenBudget-p.used+fillSlack {
			continue
		}
		tries++
		p.included[i] = true
		pieces, text, used, err := p.renderIncluded()
		if err != nil {
			return err
		}
		if used <= p.req.TokenBudget {
			p.pieces, p.text, p.used = pieces, text, used
		} else {
			p.included[i] = false
		}
	}
	if tries > 0 {
		fillDoc(p.doc, p.ranked, p.included)
	}
	return nil
}

// renderIncluded renders the document with the included entries and counts
// it exactly.
func (p *pipeline) renderIncluded() ([]render.Piece, string, int, error) {
	fillDoc(p.doc, p.ranked, p.included)
	pieces := render.Render(p.req.Format, p.doc)
	text := render.Text(pieces)
	n, err := p.count(text)
	return pieces, text, n, err
}

// fillDoc puts the included entries (and the contradiction lines their
// winners bring) into doc.
func fillDoc(doc *render.Doc, ranked []*cand, included []bool) {
	doc.Sections = map[string][]render.Entry{}
	doc.Ranked = nil
	doc.Contradictions = nil
	for i, c := range ranked {
		if !included[i] {
			continue
		}
		e := render.Entry{Ref: c.ref, Key: c.v.Key, Version: c.v.Version, Source: c.v.Source, Priority: c.v.Priority, Title: c.title, Content: c.content}
		doc.Sections[c.section] = append(doc.Sections[c.section], e)
		doc.Ranked = append(doc.Ranked, e)
		if c.listLosers {
			for _, l := range c.losers {
				doc.Contradictions = append(doc.Contradictions, contradiction(c, l))
			}
		}
	}
}
