package assemble

import (
	"context"

	"github.com/contextd/contextd/internal/ctxtype"
)

// Options change what AssembleBounded does beyond assembling.
type Options struct {
	// ExplainLayer and ExplainKey name a candidate to explain when the
	// budget did not try it: the pipeline goes on past the cutoff, without
	// trying the budget, until it meets it.
	ExplainLayer, ExplainKey string
	// Stages, when set, is told where each stage of the pipeline begins
	// and ends (metrics and traces). It sees no data of the assembly and
	// can change nothing in it; the context it returns only carries on to
	// the Source's calls of that stage. Nil: no one is told.
	Stages StageHook
}

// StageHook observes the boundaries of pipeline 2's stages: Begin is
// called as stage starts and returns the context the stage's reads go
// with, and the function that ends it. The pipeline reads no clock: the
// caller's hook does, around it.
type StageHook interface {
	Begin(ctx context.Context, stage string) (context.Context, func())
}

// The stages AssembleBounded reports to a StageHook, in order.
const (
	StagePlan    = "plan"    // lanes, the request's own parts
	StageSmall   = "small"   // pins and the top relevance matches
	StageSelect  = "select"  // the budget's start, the lanes in rank order: stages per candidate, budget, render
	StageCutoff  = "cutoff"  // counting what the budget did not try
	StageRecords = "records" // the records, in their order
	StageExplain = "explain" // only for why? of an untried candidate
)

// stage runs fn as the named stage, telling opt.Stages.
func (b *bounded) stage(ctx context.Context, name string, fn func(ctx context.Context) error) error {
	if b.opt.Stages == nil {
		return fn(ctx)
	}
	sctx, end := b.opt.Stages.Begin(ctx, name)
	defer end()
	return fn(sctx)
}

// bounded is pipeline 2's reading state around the stage pipeline.
type bounded struct {
	p   *pipeline
	src Source
	opt Options
	// reg holds one cand per (layer, key) met so far, whichever lane it
	// came from, so that every stage sees one candidate once.
	reg map[[2]string]*cand
	// small is the fired candidates of the small lanes, by rank; next
	// points at the first not yet met.
	small     []*cand
	smallNext int
	streams   []*stream
	// shadows: a key's visible, valid project item (nil: none), read for
	// the _shared candidates met.
	shadows map[string]*ctxtype.Version
	groups  map[string]bool // resolved state keys
	words   []string        // every word a person said and its marked stem, for the keyword lane
}

func (b *bounded) key(v *ctxtype.Version) [2]string { return [2]string{v.Project, v.Key} }

// cand returns the one candidate of v's item, making it on first sight.
func (b *bounded) cand(v *ctxtype.Version) *cand {
	k := b.key(v)
	if c, ok := b.reg[k]; ok {
		return c
	}
	c := &cand{v: v, layer: LayerOf(v.Project), pinned: b.p.pins[v.Key]}
	b.reg[k] = c
	return c
}

// AssembleBounded is pipeline 2: the stages of Assemble, in the same order
// of precedence, run once per candidate as the candidates are read in rank
// order from src. It reads the small lanes (pins, the top relevance
// matches) whole and the lanes of each layer (its always-on items, the
// items of each tool of the request, the keyword items of the words a
// person said) a page at a time, merging them all in rank order; stops
// TryAfterMiss candidates after the first that does not fit; counts the
// rest without reading them; and reads the text only of what it tries. It does no I/O of its own: all it
// reads comes from src, so the same source state gives the same bytes.
func AssembleBounded(ctx context.Context, in Input, src Source, opt Options) (*Result, *Explanation, error) {
	p := newPipeline(in)
	b := &bounded{p: p, src: src, opt: opt, reg: map[[2]string]*cand{}, shadows: map[string]*ctxtype.Version{}, groups: map[string]bool{}}
	err := b.stage(ctx, StagePlan, func(context.Context) error {
		b.words = p.personWords()
		for _, lane := range lanes(in.Request, b.words) {
			for _, layer := range []string{in.Project, ctxtype.SharedProject} {
				b.streams = append(b.streams, &stream{layer: layer, lane: lane, cursor: StartPos, read: StartPos})
			}
		}
		p.requestParts()
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	if err := b.stage(ctx, StageSmall, b.readSmall); err != nil {
		return nil, nil, err
	}
	// The pins the small lanes did not resolve are gaps, which the kxm
	// text lists: known before the budget starts.
	b.pinsOfRegistry()
	err = b.stage(ctx, StageSelect, func(ctx context.Context) error {
		bud, err := p.startBudget()
		if err != nil {
			return err
		}
		return b.tryAndRender(ctx, bud)
	})
	if err != nil {
		return nil, nil, err
	}
	var cutoff *Cutoff
	if err := b.stage(ctx, StageCutoff, func(ctx context.Context) (err error) { cutoff, err = b.cutoff(ctx); return err }); err != nil {
		return nil, nil, err
	}
	if err := b.stage(ctx, StageRecords, func(context.Context) error { return p.records() }); err != nil {
		return nil, nil, err
	}
	var why *Explanation
	if opt.ExplainKey != "" && cutoff != nil {
		// After the records are settled: explaining judges candidates
		// the packet never met, and must not change the packet.
		err := b.stage(ctx, StageExplain, func(ctx context.Context) (err error) { why, err = b.explain(ctx, cutoff.Rank); return err })
		if err != nil {
			return nil, nil, err
		}
	}
	res := p.result()
	res.Pipeline = Pipeline2
	res.GapsMore = capGaps(res)
	if cutoff != nil {
		cutoff.Headroom = res.Allocated - res.Used
		res.Cutoff = cutoff
		res.GapsMore += cutoff.Count
	}
	return res, why, nil
}
