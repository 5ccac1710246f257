package assemble

import (
	"slices"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/keyword"
	"github.com/contextd/contextd/internal/render"
	"github.com/contextd/contextd/internal/token"
)

// pipeline is the state one assembly carries from stage to stage. Each
// stage reads what the earlier ones left and sets its own fields, so a
// stage can be run, and tested, on a pipeline the earlier stages prepared.
type pipeline struct {
	in   Input
	req  *ctxtype.Request
	pins map[string]bool

	// shadows maps a key to the project version that overrides a _shared
	// one of that key. Only an item the role may see overrides: for the
	// role, a hidden project item does not exist, and neither may its
	// shadow.
	shadows map[string]*ctxtype.Version
	// cands are the candidates still in play, by key then project; each
	// filtering stage keeps those it passes.
	cands []*cand
	// excluded are the records of candidates dropped before ranking; they
	// are written after the ranked items, sorted by reason.
	excluded []ctxtype.Record
	// vars are the template values, built the first time a template needs
	// them; kwIndex the words of each message a person wrote, indexed.
	vars    map[string]string
	kwIndex *keyword.Index
	kwStems *keyword.Index // the stems, for stem-mode keyword triggers
	kwWords [][]string     // the words of each message a person wrote

	ranked []*cand // in rank order, contradiction losers taken out
	losers []*cand // contradiction losers, in candidate order

	doc  *render.Doc
	recs []ctxtype.Record

	// inviolable: the request's own parts alone exceed the budget, so no
	// item goes in.
	inviolable bool
	included   []bool // by index of ranked
	pieces     []render.Piece
	text       string
	// refCand and pieceCounts serve countPieces: the ranked entry of each
	// record, and each record's piece counted once.
	refCand     map[int]*cand
	pieceCounts map[int]pieceCount
	used        int
	gaps        []ctxtype.Gap
	// unresolvedPins are the pins that name nothing the role may see, in
	// key order (resolvePins; from Render3 on).
	unresolvedPins []string
}

// cand is a candidate moving through the pipeline.
type cand struct {
	v         *ctxtype.Version
	layer     string
	relevance *float64
	pinned    bool
	rule      string
	title     string // after templating
	content   string
	ref       int // record index
	section   string
	blockCost int
	loserOf   *cand // for a contradicted item: the winner
	losers    []*cand
	// listLosers: the pair lines under Active Contradictions fit the budget.
	listLosers bool
	// needed and remaining are the budget decision's figures: the tokens the
	// entry would have cost (heading included) and what was left then.
	needed, remaining int

	// Pipeline 2's bookkeeping: small (a small lane fired it), met (the
	// rank-order merge reached it), handled (it has a record: ranked or
	// excluded), hasText (title and content are read), earlyDone/earlyOK
	// (the stages before contradictions judged it, and passed it).
	small, met, handled, hasText, earlyDone, earlyOK bool
}

func newPipeline(in Input) *pipeline {
	p := &pipeline{in: in, req: in.Request, pins: map[string]bool{}, shadows: map[string]*ctxtype.Version{}}
	for _, k := range p.req.Pins {
		p.pins[k] = true
	}
	return p
}

// count is the request's tokenizer; every figure of a packet is in it.
func (p *pipeline) count(s string) (int, error) {
	if len(s) <= token.CacheMaxLen {
		return token.CountCached(p.req.Tokenizer, s)
	}
	return token.Count(p.req.Tokenizer, s)
}

// addRecord appends r and returns its index, which pieces refer to.
func (p *pipeline) addRecord(r ctxtype.Record) int {
	p.recs = append(p.recs, r)
	return len(p.recs) - 1
}

// exclude records why c left before ranking.
func (p *pipeline) exclude(c *cand, reason, detail string, adminOnly bool) {
	p.excluded = append(p.excluded, itemRecord(c, ctxtype.Excluded, reason, detail, adminOnly))
}

// result is the packet the stages built.
func (p *pipeline) result() *Result {
	return &Result{Pipeline: Pipeline1, Render: p.in.render(), Rendered: p.text, Allocated: p.req.TokenBudget, Used: p.used, Gaps: p.gaps, Records: p.recs}
}

func itemRecord(c *cand, decision, reason, detail string, adminOnly bool) ctxtype.Record {
	if IsContextPacket(c.v.Key) {
		// A part of the request, ranked and budgeted like an item.
		return ctxtype.Record{SubjectKind: ctxtype.SubjectRequest, SubjectKey: c.v.Key, Decision: decision, Reason: reason, Detail: detail,
			Rule: c.rule, Kind: c.v.Kind, Source: c.v.Source}
	}
	return ctxtype.Record{
		SubjectKind: ctxtype.SubjectItem, SubjectProject: c.v.Project, SubjectKey: c.v.Key, SubjectVersion: c.v.Version,
		Decision: decision, Reason: reason, Detail: detail, Rule: c.rule, Layer: c.layer, AdminOnly: adminOnly,
		Kind: c.v.Kind, Source: c.v.Source,
	}
}

// personWords is every distinct word a person said and, each marked with
// keyword.StemMark, every distinct stem of them, in byte order: the
// keyword lane finds keyword items by the terms of their keywords (the
// first word, or for stem-mode items the marked stem of the first word).
func (p *pipeline) personWords() []string {
	out := p.keywordIndex().Words()
	for _, s := range p.stemIndex().Words() {
		out = append(out, keyword.StemMark+s)
	}
	slices.Sort(out)
	return out
}

// fill gives a template candidate its filled title and content and
// returns the placeholders nothing filled.
func (p *pipeline) fill(c *cand) []string {
	if p.vars == nil {
		p.vars = templateVars(p.in, p.req)
	}
	var missing []string
	c.title, missing = fillTemplate(c.v.Title, p.vars, missing)
	c.content, missing = fillTemplate(c.v.Content, p.vars, missing)
	return missing
}
