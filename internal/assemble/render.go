package assemble

import (
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/render"
	"github.com/contextd/contextd/internal/token"
)

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
		if _, full := p.sectionFull(c); full {
			continue // the role's policy lets its section hold no more
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
		p.fillDoc()
	}
	return nil
}

// renderIncluded renders the document with the included entries and counts
// it exactly.
func (p *pipeline) renderIncluded() ([]render.Piece, string, int, error) {
	p.fillDoc()
	if p.req.Format == ctxtype.KXM {
		return p.renderKXM()
	}
	pieces := render.Render(p.req.Format, p.doc)
	text := render.Text(pieces)
	n, err := p.countPieces(pieces)
	return pieces, text, n, err
}

// kxmReserve is six digits, more than any budget (MaxBudget) or any
// packet's count of entries has: the base count of a kxm packet is taken
// with estimatedTokens and the gap line at this width, so it is never
// below what the text with no entry costs.
const kxmReserve = 999999

// countPieces is the exact count of the rendered text without counting it
// whole: token.CountPieces adds the counts of the pieces and recounts a
// small window around each junction. An entry's block count is the one
// stored with its version when the piece is that block; other pieces are
// counted once per assembly (their text is the same in every render of
// the budget's passes) and short scaffolding once per process.
func (p *pipeline) countPieces(pieces []render.Piece) (int, error) {
	if p.refCand == nil {
		p.refCand = map[int]*cand{}
		for _, c := range p.ranked {
			p.refCand[c.ref] = c
		}
		p.pieceCounts = map[int]pieceCount{}
	}
	texts := make([]string, len(pieces))
	known := make([]int, len(pieces))
	for i, pc := range pieces {
		texts[i] = pc.Text
		n, err := p.pieceTokens(pc)
		if err != nil {
			return 0, err
		}
		known[i] = n
	}
	return token.CountPieces(p.req.Tokenizer, texts, known)
}

// pieceCount is a piece's text and its count, kept per record.
type pieceCount struct {
	text string
	n    int
}

// pieceTokens is the exact count of one piece alone, -1 when CountPieces
// should count it itself.
func (p *pipeline) pieceTokens(pc render.Piece) (int, error) {
	if pc.Ref < 0 {
		if len(pc.Text) > token.CacheMaxLen {
			return -1, nil
		}
		return token.CountCached(p.req.Tokenizer, pc.Text)
	}
	if pk, ok := p.pieceCounts[pc.Ref]; ok && pk.text == pc.Text {
		return pk.n, nil
	}
	n := -1
	if c := p.refCand[pc.Ref]; c != nil && storedCount(p.req, c) && pc.Text == render.MarkdownItemBlock(c.title, c.content) {
		n = storedBlock(p.req, c)
	}
	if n < 0 {
		var err error
		if n, err = p.count(pc.Text); err != nil {
			return 0, err
		}
	}
	p.pieceCounts[pc.Ref] = pieceCount{text: pc.Text, n: n}
	return n, nil
}

// fillDoc puts the included entries (and the contradiction lines their
// winners bring) into doc.
func (p *pipeline) fillDoc() {
	doc, ranked, included := p.doc, p.ranked, p.included
	doc.Sections = map[string][]render.Entry{}
	doc.Ranked = nil
	doc.Contradictions = nil
	for i, c := range ranked {
		if !included[i] {
			continue
		}
		e := render.Entry{Ref: c.ref, Key: c.v.Key, Version: c.v.Version, Source: c.v.Source, Priority: c.v.Priority, Title: c.title, Content: c.content, V: c.v}
		doc.Sections[c.section] = append(doc.Sections[c.section], e)
		doc.Ranked = append(doc.Ranked, e)
		if c.listLosers {
			for _, l := range c.losers {
				doc.Contradictions = append(doc.Contradictions, p.contradiction(c, l))
			}
		}
	}
}
