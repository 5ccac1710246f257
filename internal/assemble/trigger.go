package assemble

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/keyword"
	"github.com/contextd/contextd/internal/render"
)

// RelevanceLimit is how many full-text matches the relevance trigger takes;
// the loader asks the store for this many, and explanations quote it.
const RelevanceLimit = 50

// triggers is the firing stage: a candidate whose trigger does not fire is
// neither counted nor recorded (why? answers from the request), and one
// that fires carries the rule that fired it into its record.
func (p *pipeline) triggers() {
	kept := p.cands[:0]
	for _, c := range p.cands {
		rule, fires := p.fire(c.v, c.relevance, c.pinned)
		if !fires {
			continue
		}
		c.rule = rule
		kept = append(kept, c)
	}
	p.cands = kept
}

// fire decides whether a candidate's trigger fires for the request, and
// names the rule that did. The words of each message a person wrote are
// split once per assembly, not once per candidate.
func (p *pipeline) fire(v *ctxtype.Version, relevance *float64, pinned bool) (string, bool) {
	req := p.req
	if IsContextPacket(v.Key) {
		return RuleContextPacket, true
	}
	if pinned {
		return "pin", true
	}
	t := v.Trigger
	switch {
	case t.Always:
		return "always", true
	case t.Keywords != nil:
		return p.fireKeywords(t)
	case t.Tool != nil:
		for _, tr := range req.ToolResults {
			if tr.Tool == *t.Tool {
				return "tool:" + *t.Tool, true
			}
		}
	case t.Relevance:
		if relevance != nil {
			return "relevance:" + score(*relevance), true
		}
	}
	return "", false
}

// fireKeywords decides a keyword trigger: the first message any keyword
// matches, and the first such keyword in the item's order. The rule of a
// stem-mode trigger says so, and what the person wrote that matched
// (keyword(stem):"chargeback"@history[0] matched "chargebacks"); a
// whole-word rule reads as it always has.
func (p *pipeline) fireKeywords(t ctxtype.Trigger) (string, bool) {
	ix, best, at := p.keywordMatch(t)
	switch {
	case at < 0:
		return "", false
	case t.Stem():
		_, said := ix.FirstMatch(best)
		return fmt.Sprintf("keyword(stem):%s@history[%d] matched %s", render.JSONString(best), at, render.JSONString(said)), true
	}
	return fmt.Sprintf("keyword:%s@history[%d]", render.JSONString(best), at), true
}

// keywordMatch is the index a keyword trigger matches against (words or
// stems), its keyword that matches the earliest message, and that
// message's place (-1: none matches). fireKeywords writes the rule of it;
// the keyword lane's count (firesAlone) asks only whether there is one.
func (p *pipeline) keywordMatch(t ctxtype.Trigger) (*keyword.Index, string, int) {
	ix, best, at := p.keywordIndex(), "", -1
	if t.Stem() {
		ix = p.stemIndex()
	}
	for _, k := range t.Keywords {
		if i := ix.FirstMessage(k); i >= 0 && (at < 0 || i < at) {
			best, at = k, i
		}
	}
	return ix, best, at
}

// personMessageWords is the words of each history message a person wrote
// (none for the others), split on first use.
func (p *pipeline) personMessageWords() [][]string {
	if p.kwWords == nil {
		p.kwWords = make([][]string, len(p.req.History))
		for i, m := range p.req.History {
			if m.Author == "person" {
				p.kwWords[i] = keyword.Words(m.Content)
			}
		}
	}
	return p.kwWords
}

// keywordIndex is the words a person wrote, indexed on first use.
func (p *pipeline) keywordIndex() *keyword.Index {
	if p.kwIndex == nil {
		p.kwIndex = keyword.NewIndex(p.personMessageWords())
	}
	return p.kwIndex
}

// stemIndex is the stems of the words a person wrote, indexed on first
// use, for the keyword triggers that match by stems.
func (p *pipeline) stemIndex() *keyword.Index {
	if p.kwStems == nil {
		p.kwStems = keyword.NewStemIndex(p.personMessageWords())
	}
	return p.kwStems
}

// score writes a relevance score with two decimals, or up to four when it
// is small ("0.42", "0.0333"), so rules read alike and stay informative.
func score(x float64) string {
	s := strconv.FormatFloat(x, 'f', 4, 64)
	for strings.HasSuffix(s, "0") && len(s)-strings.IndexByte(s, '.') > 3 {
		s = s[:len(s)-1]
	}
	return s
}

// NotTriggered explains why an item that was valid and live did not fire:
// which trigger it has and what the request lacked. Such items have no
// record, so explanations ask this instead.
func NotTriggered(req *ctxtype.Request, v *ctxtype.Version) string {
	t := v.Trigger
	switch {
	case t.Keywords != nil && t.Stem():
		return fmt.Sprintf("trigger keywords %q (match stem): no history message written by a person contains any of them, or words of the same stems", t.Keywords)
	case t.Keywords != nil:
		return fmt.Sprintf("trigger keywords %q (match word): no history message written by a person contains any of them as whole words", t.Keywords)
	case t.Tool != nil:
		return fmt.Sprintf("trigger tool %q: tool_results held no result of that tool", *t.Tool)
	case t.PinnedOnly:
		return "trigger pinned_only: the request did not pin it"
	case t.Relevance:
		if strings.TrimSpace(req.Query) == "" {
			return "trigger relevance: the request had no query"
		}
		return fmt.Sprintf("trigger relevance: it did not rank among the top %d full-text matches of the query %q", RelevanceLimit, req.Query)
	}
	return "its trigger did not fire"
}
