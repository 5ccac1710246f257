package assemble

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/keyword"
	"github.com/contextd/contextd/internal/render"
)

// The pipeline versions. A packet stores the version that made it, and a
// replay renders with that version's code, so a packet made before a
// change of the bytes still replays byte for byte.
const (
	// Pipeline1 reads every plausible candidate, tries every one against
	// the budget and ranks relevance with ts_rank_cd (Assemble).
	Pipeline1 = 1
	// Pipeline2 reads candidates in rank order from a Source, stops trying
	// TryAfterMiss candidates after the first that does not fit, and ranks
	// relevance with TopRelevance (AssembleBounded).
	Pipeline2 = 2
	// Current is the pipeline new packets are made by.
	Current = Pipeline2
)

// The versions of the text layout, which a packet stores beside its
// pipeline (a replay writes the layout it was rendered with).
const (
	// Render1 names only the keys in a contradiction line.
	Render1 = 1
	// Render2 names the facts in a contradiction line (the winner's and
	// the loser's content, cut at 120 characters), as KXM prints the
	// losing fact, and the loser's record carries the line's tokens.
	Render2 = 2
	// CurrentRender is the layout new packets are rendered with.
	CurrentRender = Render2
)

// TryAfterMiss is how many candidates the budget still tries, in rank
// order, after the first one that did not fit; every candidate after them
// is excluded with reason budget_cutoff without being tried.
const TryAfterMiss = 32

// MaxGaps is how many budget exclusions unresolved_gaps lists (the highest
// ranked, after the inviolable gap when there is one); GapsMore counts the
// rest.
const MaxGaps = 20

// pageSize is how many rows of a lane pipeline 2 reads at a time.
const pageSize = 64

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
	StagePlan    = "plan"    // lanes, the request's own parts, the budget's start
	StageSmall   = "small"   // pins and the top relevance matches
	StageSelect  = "select"  // the lanes in rank order: stages per candidate, budget, render
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

// stream is one lane of one layer in rank order, a page at a time.
type stream struct {
	layer  string
	lane   Lane
	buf    []*cand
	done   bool
	cursor RankPos // the last row taken from buf
	read   RankPos // the last row read from the source
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
	var bud *budgeter
	err := b.stage(ctx, StagePlan, func(context.Context) error {
		b.words = p.personWords()
		for _, lane := range lanes(in.Request, b.words) {
			for _, layer := range []string{in.Project, SharedProject} {
				b.streams = append(b.streams, &stream{layer: layer, lane: lane, cursor: StartPos, read: StartPos})
			}
		}
		p.requestParts()
		var err error
		bud, err = p.startBudget()
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if err := b.stage(ctx, StageSmall, b.readSmall); err != nil {
		return nil, nil, err
	}
	if err := b.stage(ctx, StageSelect, func(ctx context.Context) error { return b.tryAndRender(ctx, bud) }); err != nil {
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

// lanes are the streams of a request: the always-on items, the items of
// each tool that returned a result, and the keyword items when a person
// said something.
func lanes(req *Request, words []string) []Lane {
	out := []Lane{{}}
	if len(words) > 0 {
		out = append(out, Lane{Keywords: true})
	}
	for _, tr := range req.ToolResults {
		if l := (Lane{Tool: tr.Tool}); !slices.Contains(out, l) {
			out = append(out, l)
		}
	}
	return out
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
	var kept []Gap
	n, more := 0, 0
	for _, g := range res.Gaps {
		if g.Reason != ReasonBudget {
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

// readSmall reads the small lanes and the relevance winners, keeps those
// that fire and are valid, and orders them by rank.
func (b *bounded) readSmall(ctx context.Context) error {
	p, req := b.p, b.p.req
	layers := []string{p.in.Project, SharedProject}
	rows, err := b.src.Small(ctx, SmallQuery{Layers: layers, Pins: req.Pins})
	if err != nil {
		return err
	}
	scores := map[[2]string]float64{}
	if strings.TrimSpace(req.Query) != "" {
		postings, n, err := b.src.Postings(ctx, RelevanceQuery{Layers: layers, Query: req.Query, Role: req.TargetRole, Now: p.in.Now})
		if err != nil {
			return err
		}
		byLayer := map[string][]string{}
		for _, s := range TopRelevance(postings, n) {
			scores[[2]string{s.Layer, s.Key}] = s.Score
			byLayer[s.Layer] = append(byLayer[s.Layer], s.Key)
		}
		for _, layer := range layers {
			if len(byLayer[layer]) == 0 {
				continue
			}
			vs, err := b.src.ByKeys(ctx, layer, byLayer[layer])
			if err != nil {
				return err
			}
			rows = append(rows, vs...)
		}
	}
	rows = append(rows, p.contextPackets()...)
	for _, v := range rows {
		if _, seen := b.reg[b.key(v)]; seen || !ValidAt(v, p.in.Now) {
			continue
		}
		c := b.cand(v)
		if IsContextPacket(v.Key) {
			c.hasText, c.title, c.content = true, v.Title, v.Content // the request's text, not the database's
		}
		if s, ok := scores[b.key(v)]; ok {
			c.relevance = &s
		}
		rule, fires := p.fire(v, c.relevance, c.pinned)
		if !fires {
			continue
		}
		c.rule, c.small = rule, true
		b.small = append(b.small, c)
	}
	slices.SortFunc(b.small, byRank)
	var shared []string
	for _, c := range b.small {
		if c.v.Project == SharedProject {
			shared = append(shared, c.v.Key)
		}
	}
	return b.readShadows(ctx, shared)
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

// readShadows learns, for _shared keys not seen yet, whether the project
// holds a live item of the key that is valid now and visible to the role.
func (b *bounded) readShadows(ctx context.Context, keys []string) error {
	var need []string
	for _, k := range keys {
		if _, ok := b.shadows[k]; !ok && !slices.Contains(need, k) {
			need = append(need, k)
		}
	}
	if len(need) == 0 {
		return nil
	}
	vs, err := b.src.ByKeys(ctx, b.p.in.Project, need)
	if err != nil {
		return err
	}
	for _, k := range need {
		b.shadows[k] = nil
	}
	for _, v := range vs {
		if ValidAt(v, b.p.in.Now) && v.Roles.Visible(b.p.req.TargetRole) {
			b.shadows[v.Key] = v
		}
	}
	return nil
}

// next is the next candidate in rank order that fires and has not been
// met, or nil when there is none.
func (b *bounded) next(ctx context.Context) (*cand, error) {
	for {
		var best *cand
		var from *stream
		for _, s := range b.streams {
			c, err := b.head(ctx, s)
			if err != nil {
				return nil, err
			}
			if c != nil && (best == nil || byRank(c, best) < 0) {
				best, from = c, s
			}
		}
		if b.smallNext < len(b.small) {
			if c := b.small[b.smallNext]; best == nil || byRank(c, best) < 0 {
				best, from = c, nil
			}
		}
		if best == nil {
			return nil, nil
		}
		if from == nil {
			b.smallNext++
		} else {
			from.buf = from.buf[1:]
			from.cursor = PosOf(best.v)
		}
		if best.met {
			continue
		}
		best.met = true
		return best, nil
	}
}

// head is the first candidate of a stream not yet passed over, reading a
// page when the buffer is empty. Rows that are not valid now are passed
// over (for the packet they do not exist), and so are items a small lane
// already holds.
func (b *bounded) head(ctx context.Context, s *stream) (*cand, error) {
	for {
		if len(s.buf) == 0 {
			if s.done {
				return nil, nil
			}
			if err := b.readPage(ctx, s); err != nil {
				return nil, err
			}
			continue
		}
		c := s.buf[0]
		if c.small || c.rule == "" || !ValidAt(c.v, b.p.in.Now) {
			s.buf = s.buf[1:]
			s.cursor = PosOf(c.v)
			continue
		}
		return c, nil
	}
}

func (b *bounded) readPage(ctx context.Context, s *stream) error {
	vs, err := b.src.Lane(ctx, b.query(s, s.read), pageSize)
	if err != nil {
		return err
	}
	if len(vs) < pageSize {
		s.done = true
	}
	var shared []string
	var needText []*ctxtype.Version
	for _, v := range vs {
		c := b.cand(v)
		if !c.small {
			c.rule, _ = b.p.fire(c.v, nil, false)
		}
		s.buf = append(s.buf, c)
		s.read = PosOf(v)
		if v.Project == SharedProject {
			shared = append(shared, v.Key)
		}
		// Templates are filled when met, and outside markdown every
		// entry's cost is counted from its text: read the page's at once.
		if v.Template || b.p.req.Format != render.Markdown {
			needText = append(needText, c.v)
		}
	}
	if err := b.readGroups(ctx, s.buf); err != nil {
		return err
	}
	if err := b.src.Texts(ctx, needText); err != nil {
		return err
	}
	return b.readShadows(ctx, shared)
}

// admit runs the stages of Assemble on one candidate that fired, in their
// order of precedence (overrides, visibility, templates, contradictions),
// and reports whether it goes on to ranking.
func (b *bounded) admit(ctx context.Context, c *cand) (bool, error) {
	ok, err := b.early(ctx, c)
	if err != nil || !ok {
		return false, err
	}
	if sk := c.v.StateKey; sk != "" {
		if err := b.resolveGroup(ctx, sk); err != nil {
			return false, err
		}
		if c.loserOf != nil {
			return false, nil
		}
	}
	c.handled = true
	return true, nil
}

// early runs the stages before contradictions on a candidate, once: a
// candidate met in rank order and the same one judged earlier as the
// contender of a state key get one judgement and at most one record.
func (b *bounded) early(ctx context.Context, c *cand) (bool, error) {
	if c.earlyDone {
		return c.earlyOK, nil
	}
	c.earlyDone = true
	p := b.p
	if c.v.Project == SharedProject {
		if err := b.readShadows(ctx, []string{c.v.Key}); err != nil {
			return false, err
		}
		if over := b.shadows[c.v.Key]; over != nil {
			p.exclude(c, ReasonOverridden, fmt.Sprintf("overridden by project item %s v%d", over.Key, over.Version),
				!c.v.Roles.Visible(p.req.TargetRole))
			c.handled = true
			return false, nil
		}
	}
	if !c.v.Roles.Visible(p.req.TargetRole) {
		p.exclude(c, ReasonHidden, fmt.Sprintf("not visible to role %q (visible_to %v, hidden_from %v)",
			p.req.TargetRole, c.v.Roles.VisibleTo, c.v.Roles.HiddenFrom), true)
		c.handled = true
		return false, nil
	}
	if c.v.Template {
		if err := b.texts(ctx, []*cand{c}); err != nil {
			return false, err
		}
		if missing := p.fill(c); len(missing) > 0 {
			p.exclude(c, ReasonTemplateUnresolved, "no value for "+strings.Join(missing, ", "), false)
			c.handled = true
			return false, nil
		}
	}
	c.earlyOK = true
	return true, nil
}

// readGroups reads, in one trip, the contenders of the state keys of a
// page that are not resolved yet.
func (b *bounded) readGroups(ctx context.Context, cs []*cand) error {
	var keys []string
	for _, c := range cs {
		if sk := c.v.StateKey; sk != "" && !b.groups[sk] && !slices.Contains(keys, sk) {
			keys = append(keys, sk)
		}
	}
	return b.readGroupRows(ctx, keys)
}

func (b *bounded) readGroupRows(ctx context.Context, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	vs, err := b.src.StateGroups(ctx, []string{b.p.in.Project, SharedProject}, keys)
	if err != nil {
		return err
	}
	var shared []string
	for _, v := range vs {
		b.cand(v)
		if v.Project == SharedProject {
			shared = append(shared, v.Key)
		}
	}
	for _, k := range keys {
		b.groups[k] = false // read, not resolved
	}
	return b.readShadows(ctx, shared)
}

// resolveGroup is the contradictions stage for one state key: of the
// contenders that fire and pass the earlier stages, the strongest goes on
// to ranking and the others with other content become its losers,
// recorded as contradicted whether or not the budget reaches them.
func (b *bounded) resolveGroup(ctx context.Context, sk string) error {
	if done, read := b.groups[sk]; done {
		return nil
	} else if !read {
		if err := b.readGroupRows(ctx, []string{sk}); err != nil {
			return err
		}
	}
	b.groups[sk] = true
	var group []*cand
	for _, c := range b.reg {
		if c.v.StateKey == sk && b.fires(c) {
			group = append(group, c)
		}
	}
	slices.SortFunc(group, func(x, y *cand) int { return strings.Compare(x.v.Key+"\x00"+x.v.Project, y.v.Key+"\x00"+y.v.Project) })
	var contenders []*cand
	for _, c := range group {
		ok, err := b.early(ctx, c)
		if err != nil {
			return err
		}
		if ok {
			contenders = append(contenders, c)
		}
	}
	if len(contenders) < 2 {
		return nil
	}
	slices.SortFunc(contenders, stronger)
	winner := contenders[0]
	for _, c := range contenders[1:] {
		same, err := b.sameContent(ctx, c, winner)
		if err != nil {
			return err
		}
		if same {
			continue
		}
		c.loserOf = winner
		winner.losers = append(winner.losers, c)
		c.handled = true
		b.p.losers = append(b.p.losers, c)
	}
	if len(winner.losers) > 0 && b.p.in.render() >= Render2 {
		// The pair lines quote both facts: read their text now, in one trip.
		return b.texts(ctx, append([]*cand{winner}, winner.losers...))
	}
	return nil
}

// fires reports whether a contender fires: the items of the request's
// lanes do, any other only when a small lane fired it.
func (b *bounded) fires(c *cand) bool {
	if c.small {
		return true
	}
	for _, s := range b.streams {
		if b.inLane(s, c.v) && ValidAt(c.v, b.p.in.Now) {
			if c.rule == "" {
				c.rule, _ = b.p.fire(c.v, nil, false)
			}
			return true
		}
	}
	return false
}

// query is a stream's lane after a position.
func (b *bounded) query(s *stream, after RankPos) LaneQuery {
	return LaneQuery{Layer: s.layer, Lane: s.lane, After: after, Words: b.words}
}

// inLane reports whether v is one of the stream's candidates: of its lane,
// and for the keyword lane, firing.
func (b *bounded) inLane(s *stream, v *ctxtype.Version) bool {
	if !b.query(s, StartPos).Holds(v) {
		return false
	}
	return !s.lane.Keywords || b.firesAlone(v)
}

// firesAlone reports whether v's own trigger fires (no pin, no relevance).
func (b *bounded) firesAlone(v *ctxtype.Version) bool {
	_, ok := b.p.fire(v, nil, false)
	return ok
}

// sameContent is agreement: the same content is no contradiction.
func (b *bounded) sameContent(ctx context.Context, x, y *cand) (bool, error) {
	if !x.v.Template && !y.v.Template {
		return x.v.ContentSHA256 == y.v.ContentSHA256, nil
	}
	if err := b.texts(ctx, []*cand{x, y}); err != nil {
		return false, err
	}
	return x.content == y.content, nil
}

// costable makes sure a ranked candidate can be priced: its text is read
// when its block count was not stored.
func (b *bounded) costable(ctx context.Context, c *cand) error {
	if storedCount(b.p.req, c) {
		return nil
	}
	return b.texts(ctx, []*cand{c})
}

// texts reads the text of the candidates that lack it, in one trip, and
// gives each the title and content it shows (templates filled).
func (b *bounded) texts(ctx context.Context, cs []*cand) error {
	var need []*ctxtype.Version
	for _, c := range cs {
		if !c.hasText {
			need = append(need, c.v)
		}
	}
	if len(need) > 0 {
		if err := b.src.Texts(ctx, need); err != nil {
			return err
		}
	}
	for _, c := range cs {
		if !c.hasText {
			c.hasText = true
			c.title, c.content = c.v.Title, c.v.Content
		}
	}
	return nil
}

// cutoff counts the candidates the budget did not try: the visible
// always-on items after each stream's position that no lane already
// handled, and the small lanes' candidates not met. Nil when there are none.
func (b *bounded) cutoff(ctx context.Context) (*Cutoff, error) {
	role, now := b.p.req.TargetRole, b.p.in.Now
	n := 0
	for _, s := range b.streams {
		if s.done && len(s.buf) == 0 {
			continue
		}
		k, err := b.src.CountAfter(ctx, b.query(s, s.cursor), role, now, b.firesAlone)
		if err != nil {
			return nil, err
		}
		n += k
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
			return &Explanation{Reason: ReasonContradicted, Rank: rank, Rule: c.rule,
				Detail: fmt.Sprintf("contradicted by %s v%d on state_key %q", c.loserOf.v.Key, c.loserOf.v.Version, c.v.StateKey)}, nil
		}
		ok, err := b.admit(ctx, c)
		if err != nil {
			return nil, err
		}
		switch {
		case c.loserOf != nil:
			return &Explanation{Reason: ReasonContradicted, Rank: rank, Rule: c.rule,
				Detail: fmt.Sprintf("contradicted by %s v%d on state_key %q", c.loserOf.v.Key, c.loserOf.v.Version, c.v.StateKey)}, nil
		case !ok && len(b.p.excluded) > before:
			r := b.p.excluded[len(b.p.excluded)-1]
			b.p.excluded = b.p.excluded[:before]
			if r.Reason == ReasonHidden {
				rank = 0
			}
			return &Explanation{Reason: r.Reason, Detail: r.Detail, Rank: rank, Rule: c.rule}, nil
		}
		return &Explanation{Reason: ReasonBudgetCutoff, Rank: rank, Rule: c.rule,
			Detail: fmt.Sprintf("rank %d, at or after the cutoff at rank %d: the budget tried %d candidates after the first that did not fit, and no later one",
				rank, cutoffRank, TryAfterMiss)}, nil
	}
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
