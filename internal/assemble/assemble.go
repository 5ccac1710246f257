// Package assemble is the pure core of contextd: from a request, the
// candidate item versions and the packet's time it selects, ranks, budgets
// and renders a packet, and records every decision it took. It does no I/O,
// reads no clock and draws no random numbers, so the same inputs always give
// the same bytes — which is what makes a stored packet replayable.
//
// Assemble (pipeline 1) runs a fixed sequence of stages over one pipeline
// value; each stage is a method in the file named after it, narrows or
// annotates the candidates, and writes the records of what it left out.
// AssembleBounded (pipeline 2, bounded.go) runs the same stages once per
// candidate as it reads them in rank order from a Source, and stops when
// the budget is full; packets remember which pipeline made them, and
// replay with it.
package assemble

import (
	"time"

	"github.com/contextd/contextd/internal/ctxtype"
)

// Candidate is one current item version that may enter the packet; the
// caller loads it, the pipeline decides.
type Candidate struct {
	Version *ctxtype.Version
	// Relevance is the item's full-text rank against the request's query
	// when it is among the top matches, nil otherwise.
	Relevance *float64
}

// Input is everything an assembly depends on, so that storing it is enough
// to replay the packet.
type Input struct {
	Project string
	// PacketID is the id the packet will be stored under (a replay passes
	// the stored one): the kxm format writes it, with Now, into the text.
	PacketID   string
	Request    *ctxtype.Request
	Candidates []Candidate
	// Predecessors are the request's predecessor handoffs, in its order.
	Predecessors []ctxtype.Predecessor
	// Now is the packet's own time: validity windows are judged at it and
	// the {{now}} built-in renders it.
	Now time.Time
	// Render is the version of the text layout to write: a replay passes
	// the stored packet's, so a packet replays as it was rendered; 0 is
	// CurrentRender.
	Render int
}

// render is the layout version in effect.
func (in Input) render() int {
	if in.Render == 0 {
		return CurrentRender
	}
	return in.Render
}

// Result is an assembled packet: its text, what it cost against the
// budget, and the records that explain it.
type Result struct {
	// Pipeline is the version of the pipeline that made it.
	Pipeline  int
	Rendered  string
	Allocated int
	Used      int
	Gaps      []ctxtype.Gap
	// GapsMore counts the budget exclusions Gaps does not list (pipeline
	// 2 lists at most MaxGaps), the untried ones included.
	GapsMore int
	// Render is the version of the text layout it was rendered with.
	Render int
	// Cutoff is where pipeline 2's budget stopped trying, nil when it
	// tried every candidate.
	Cutoff  *Cutoff
	Records []ctxtype.Record
}

// Assemble builds a packet from candidates. It does no I/O, so the same
// inputs always give the same bytes; it fails only if the tokenizer does.
// The order of the stages is the order of precedence of their reasons: a
// candidate that does not fire is never reported overridden, an overridden
// one never hidden, a hidden one never unresolved.
func Assemble(in Input) (*Result, error) {
	p := newPipeline(in)
	p.candidates()
	p.triggers()
	p.overrides()
	p.visibility()
	p.templates()
	p.contradictions()
	p.rank()
	p.requestParts()
	p.itemRecords()
	p.pinsOfCandidates()
	if err := p.budget(); err != nil {
		return nil, err
	}
	if err := p.render(); err != nil {
		return nil, err
	}
	if err := p.records(); err != nil {
		return nil, err
	}
	return p.result(), nil
}
