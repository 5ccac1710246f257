package assemble

import (
	"fmt"
	"strconv"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/render"
)

// maxSettle bounds the passes that settle the kxm format's estimatedTokens.
const maxSettle = 8

// kxmRender is one rendering of the kxm format with its gap lines.
type kxmRender struct {
	pieces []render.Piece
	text   string
	used   int
	gaps   []string
}

// renderKXM renders the kxm format, whose text holds its own token count
// (budget.estimatedTokens) and its gaps (textGaps). From Render3 on the
// gaps name the entries the budget left out, as many of the first MaxGaps
// as the budget holds beside the included entries: the most that fit is
// found by halving (more names never cost fewer tokens), and when none
// fits the line counts them, the one form the budget reserved room for.
func (p *pipeline) renderKXM() ([]render.Piece, string, int, error) {
	out := p.leftOut()
	most := 0
	if p.in.render() >= Render3 {
		most = min(len(out), MaxGaps)
	}
	r, err := p.settleKXM(p.textGaps(out, most))
	if err != nil || most == 0 || r.used <= p.req.TokenBudget {
		return r.pieces, r.text, r.used, err
	}
	var best *kxmRender
	for lo, hi := 1, most-1; lo <= hi; {
		mid := (lo + hi) / 2
		try, err := p.settleKXM(p.textGaps(out, mid))
		if err != nil {
			return nil, "", 0, err
		}
		if try.used <= p.req.TokenBudget {
			best, lo = &try, mid+1
		} else {
			hi = mid - 1
		}
	}
	if best == nil {
		if r, err = p.settleKXM(p.textGaps(out, 0)); err != nil {
			return nil, "", 0, err
		}
		best = &r
	}
	p.doc.Gaps, p.doc.Used = best.gaps, best.used
	return best.pieces, best.text, best.used, nil
}

// settleKXM renders the kxm format with gaps, its count settled by
// fixpoint: render with a guess (the last count), count exactly, and
// render again with that count until the two agree. Both tokenizers split
// digits into pre-tokens of at most three, each one token, so the
// number's own tokens depend only on its digit count and grow with it;
// the count as a function of the guess is then non-decreasing and takes
// at most two or three values, and iterating it reaches a fixpoint in a
// pass or two.
func (p *pipeline) settleKXM(gaps []string) (kxmRender, error) {
	p.doc.Gaps = gaps
	for pass := 0; ; pass++ {
		pieces := render.Render(ctxtype.KXM, p.doc)
		n, err := p.countPieces(pieces)
		if err != nil {
			return kxmRender{}, err
		}
		if n == p.doc.Used {
			return kxmRender{pieces: pieces, text: render.Text(pieces), used: n, gaps: gaps}, nil
		}
		if pass == maxSettle {
			return kxmRender{}, fmt.Errorf("kxm: estimatedTokens did not settle (%d, then %d)", p.doc.Used, n)
		}
		p.doc.Used = n
	}
}

// leftOut are the ranked entries the budget has left out so far, in rank
// order.
func (p *pipeline) leftOut() []*cand {
	var out []*cand
	for i, c := range p.ranked {
		if i >= len(p.included) || !p.included[i] {
			out = append(out, c)
		}
	}
	return out
}

// textGaps are the kxm format's unresolvedGaps: the inviolable gap; from
// Render3 on each unresolved pin, and the first named of the entries the
// budget tried and left out by layer, key and version; then one line
// counting the rest of them (pipeline 2's untried candidates, counted
// after rendering, are not among them). The count line, all a packet
// before Render3 writes, has a fixed form, so the budget can reserve its
// tokens up front (kxmReserve) and a packet that fits with no entry still
// fits when every entry is left out.
func (p *pipeline) textGaps(out []*cand, named int) []string {
	gaps := []string{}
	if p.inviolable {
		gaps = append(gaps, gapInviolable)
	}
	gaps = append(gaps, p.pinLines()...)
	for _, c := range out[:named] {
		gaps = append(gaps, kxmEntryGap(c))
	}
	if rest := len(out) - named; rest > 0 {
		gaps = append(gaps, p.kxmCountGap(rest, named > 0))
	}
	return gaps
}

// kxmEntryGap names one entry the budget left out: its layer, key and
// version (a part of the request, by its key).
func kxmEntryGap(c *cand) string {
	if IsContextPacket(c.v.Key) {
		return ctxtype.ReasonBudget + ": " + c.v.Key
	}
	return ctxtype.ReasonBudget + ": " + c.v.Project + "/" + c.v.Key + " v" + strconv.Itoa(c.v.Version)
}

// kxmCountGap is the line counting n entries left out, after the ones
// named (more) or alone. Before Render3 it sent the reader to the packet's
// answer, where the entries are listed.
func (p *pipeline) kxmCountGap(n int, more bool) string {
	switch {
	case p.in.render() < Render3:
		return fmt.Sprintf("%s: %d entries left out (the packet's budget.unresolved_gaps lists them)", ctxtype.ReasonBudget, n)
	case more:
		return fmt.Sprintf("%s: %d more entries left out", ctxtype.ReasonBudget, n)
	}
	return fmt.Sprintf("%s: %d entries left out", ctxtype.ReasonBudget, n)
}
