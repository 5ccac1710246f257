package assemble

import (
	"fmt"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/render"
)

// records is the last stage: every piece of text gives its record a span,
// every ranked item learns whether it went in (its position and tokens) or
// why not (the budget, with the figures of that decision), and a request
// part left out of the text (an empty objective) loses its record, as
// there is nothing of it to explain (one an ablation left out keeps it) (a context packet keeps its record:
// it is ranked and budgeted like an item, and may be left out like one).
func (p *pipeline) records() error {
	p.spans()
	if err := p.itemOutcomes(); err != nil {
		return err
	}
	kept := p.recs[:0]
	for _, r := range p.recs {
		if r.SubjectKind == ctxtype.SubjectRequest && r.Span == nil && r.Decision == ctxtype.Included && !IsContextPacket(r.SubjectKey) {
			continue
		}
		kept = append(kept, r)
	}
	p.recs = kept
	return nil
}

// spans gives each piece's record the byte range of that piece; a request
// part or predecessor is counted here, an item in itemOutcomes.
func (p *pipeline) spans() {
	off := 0
	for _, pc := range p.pieces {
		if pc.Ref >= 0 {
			r := &p.recs[pc.Ref]
			r.Span = &ctxtype.Span{Start: off, End: off + len(pc.Text)}
			// A contradiction line is its loser's piece: from Render2 on,
			// the loser's record carries the line's tokens.
			if r.SubjectKind != ctxtype.SubjectItem || (r.Reason == ctxtype.ReasonContradicted && p.in.render() >= Render2) {
				r.Tokens, _ = p.exactPiece(pc)
			}
		}
		off += len(pc.Text)
	}
}

// itemOutcomes settles the record of each ranked item and adds a gap for
// each one the budget left out.
func (p *pipeline) itemOutcomes() error {
	var err error
	positions := map[string]int{}
	for i, c := range p.ranked {
		r := &p.recs[c.ref]
		if p.included[i] {
			r.Position = positions[c.section]
			positions[c.section]++
			if c.blockCost == 0 {
				c.blockCost, _ = entryCost(p.req, c)
			}
			r.Tokens = c.blockCost
			if !storedCount(p.req, c) && r.Span != nil {
				// The budget's estimate includes separators; the record
				// counts exactly the bytes of its span.
				if r.Tokens, err = p.exactPiece(render.Piece{Ref: c.ref, Text: p.text[r.Span.Start:r.Span.End]}); err != nil {
					return err
				}
			}
			continue
		}
		if c.blockCost == 0 {
			if c.blockCost, err = entryCost(p.req, c); err != nil {
				return err
			}
		}
		r.Decision, r.Reason, r.Tokens = ctxtype.Excluded, ctxtype.ReasonBudget, c.blockCost
		if p.inviolable {
			r.Detail = fmt.Sprintf("the task, criteria, plan, predecessors and host state alone exceed the budget of %d", p.req.TokenBudget)
		} else {
			r.Detail = fmt.Sprintf("needed %d tokens with its heading; %d of the budget of %d were left after higher-ranked entries", c.needed, c.remaining, p.req.TokenBudget)
		}
		p.gaps = append(p.gaps, ctxtype.Gap{Key: c.v.Key, Version: c.v.Version, Tokens: c.blockCost, Reason: ctxtype.ReasonBudget})
	}
	return nil
}

// exactPiece is the exact count of one piece of the text, from the counts
// the render stage already took when it has them.
func (p *pipeline) exactPiece(pc render.Piece) (int, error) {
	if p.pieceCounts != nil {
		if n, err := p.pieceTokens(pc); err != nil || n >= 0 {
			return n, err
		}
	}
	return p.count(pc.Text)
}
