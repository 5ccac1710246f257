// Package assemble is the pure core of contextd: from a request, the
// candidate item versions and the packet's time it selects, ranks, budgets
// and renders a packet, and records every decision it took. It does no I/O,
// reads no clock and draws no random numbers, so the same inputs always give
// the same bytes — which is what makes a stored packet replayable.
package assemble

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/keyword"
	"github.com/contextd/contextd/internal/render"
	"github.com/contextd/contextd/internal/token"
)

// SharedProject is the reserved project of shared defaults.
const SharedProject = "_shared"

// Decisions and exclusion reasons, as stored in records.
const (
	Included = "included"
	Excluded = "excluded"

	ReasonBudget             = "budget"
	ReasonTemplateUnresolved = "template_unresolved"
	ReasonContradicted       = "contradicted"
	ReasonOverridden         = "overridden"
	ReasonHidden             = "hidden"
)

// Subject kinds of a record.
const (
	SubjectItem    = "item"
	SubjectRequest = "request"
	SubjectHandoff = "handoff"
)

// Candidate is one current item version that may enter the packet.
type Candidate struct {
	Version *ctxtype.Version
	// Relevance is the item's full-text rank against the request's query
	// when it is among the top matches, nil otherwise.
	Relevance *float64
}

// Predecessor is a handoff a packet builds on, resolved when the packet was
// assembled and stored with it, so a replay renders it the same.
type Predecessor struct {
	ID              string            `json:"id"`
	SourceRole      string            `json:"source_role"`
	TargetRole      string            `json:"target_role"`
	Status          string            `json:"status"`
	StepID          string            `json:"step_id"`
	AttemptID       string            `json:"attempt_id"`
	Summary         string            `json:"summary"`
	Decisions       []string          `json:"decisions"`
	Artifacts       []render.Artifact `json:"artifacts"`
	Verdicts        []render.Verdict  `json:"verdicts"`
	WitnessExitCode *int              `json:"witness_exit_code,omitempty"`
	WitnessPassed   *bool             `json:"witness_passed,omitempty"`
}

// Input is everything an assembly depends on.
type Input struct {
	Project    string
	Request    *Request
	Candidates []Candidate
	// Predecessors are the request's predecessor handoffs, in its order.
	Predecessors []Predecessor
	// Now is the packet's own time: validity windows are judged at it and
	// the {{now}} built-in renders it.
	Now time.Time
}

// Span is a byte range [Start, End) of the rendered text.
type Span struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

// Record is one decision about one subject.
type Record struct {
	SubjectKind    string
	SubjectProject string // for items: the project the version lives in
	SubjectKey     string // item key, request part, or handoff id
	SubjectVersion int
	Decision       string
	Section        string
	Position       int
	Span           *Span
	Tokens         int
	Rank           int
	Rule           string
	Reason         string
	Detail         string
	Layer          string // project or shared
	// AdminOnly marks records of items hidden from the target role; only
	// admins ever see them.
	AdminOnly bool
	// Kind and Source of an item, for the provenance summary.
	Kind, Source string
}

// Gap is an unresolved gap of the budget.
type Gap struct {
	Key     string `json:"key,omitempty"`
	Version int    `json:"version,omitempty"`
	Tokens  int    `json:"tokens,omitempty"`
	Reason  string `json:"reason"`
}

// Result is an assembled packet.
type Result struct {
	Rendered  string
	Allocated int
	Used      int
	Gaps      []Gap
	Records   []Record
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
}

func layerOf(project string) string {
	if project == SharedProject {
		return "shared"
	}
	return "project"
}

// Assemble runs the pipeline. It fails only if the tokenizer does.
func Assemble(in Input) (*Result, error) {
	req := in.Request
	var records []Record
	addRecord := func(r Record) int {
		records = append(records, r)
		return len(records) - 1
	}
	pins := map[string]bool{}
	for _, p := range req.Pins {
		pins[p] = true
	}

	// 1. Candidates: live, valid now; a project item overrides a _shared one.
	var live []*cand
	projectKeys := map[string]*ctxtype.Version{}
	for _, c := range in.Candidates {
		v := c.Version
		if v.Deleted || !ValidAt(v, in.Now) {
			continue
		}
		live = append(live, &cand{v: v, layer: layerOf(v.Project), relevance: c.Relevance, pinned: pins[v.Key]})
		// Only an item the role may see overrides: for the role, a hidden
		// project item does not exist, and neither may its shadow.
		if v.Project != SharedProject && v.Roles.Visible(req.TargetRole) {
			projectKeys[v.Key] = v
		}
	}
	sort.SliceStable(live, func(i, j int) bool {
		if live[i].v.Key != live[j].v.Key {
			return live[i].v.Key < live[j].v.Key
		}
		return live[i].v.Project < live[j].v.Project
	})
	var excluded []Record
	var survivors []*cand
	for _, c := range live {
		rule, fires := fire(req, c.v, c.relevance, c.pinned)
		if !fires {
			continue // neither counted nor recorded; why? answers from the request
		}
		c.rule = rule
		visible := c.v.Roles.Visible(req.TargetRole)
		if over, ok := projectKeys[c.v.Key]; ok && c.v.Project == SharedProject {
			excluded = append(excluded, itemRecord(c, Excluded, ReasonOverridden,
				fmt.Sprintf("overridden by project item %s v%d", over.Key, over.Version), !visible))
			continue
		}
		// 2. Visibility.
		if !visible {
			excluded = append(excluded, itemRecord(c, Excluded, ReasonHidden,
				fmt.Sprintf("not visible to role %q (visible_to %v, hidden_from %v)", req.TargetRole, c.v.Roles.VisibleTo, c.v.Roles.HiddenFrom), true))
			continue
		}
		// 4. Templates.
		c.title, c.content = c.v.Title, c.v.Content
		if c.v.Template {
			vars := templateVars(in, req)
			var missing []string
			c.title, missing = fillTemplate(c.v.Title, vars, missing)
			c.content, missing = fillTemplate(c.v.Content, vars, missing)
			if len(missing) > 0 {
				excluded = append(excluded, itemRecord(c, Excluded, ReasonTemplateUnresolved,
					"no value for "+strings.Join(missing, ", "), false))
				continue
			}
		}
		survivors = append(survivors, c)
	}

	// 5. Contradictions.
	byState := map[string][]*cand{}
	var stateKeys []string
	for _, c := range survivors {
		if sk := c.v.StateKey; sk != "" {
			if _, ok := byState[sk]; !ok {
				stateKeys = append(stateKeys, sk)
			}
			byState[sk] = append(byState[sk], c)
		}
	}
	sort.Strings(stateKeys)
	contradicted := map[*cand]bool{}
	for _, sk := range stateKeys {
		group := byState[sk]
		if len(group) < 2 {
			continue
		}
		slices.SortFunc(group, stronger)
		winner := group[0]
		for _, c := range group[1:] {
			if c.content == winner.content {
				continue
			}
			c.loserOf = winner
			winner.losers = append(winner.losers, c)
			contradicted[c] = true
		}
	}
	var ranked []*cand
	for _, c := range survivors {
		if !contradicted[c] {
			ranked = append(ranked, c)
		}
	}

	// 6. Rank: a total order.
	slices.SortFunc(ranked, byRank)

	// Records: request parts first, then ranked items, then the rest.
	doc := &render.Doc{Project: in.Project, TargetRole: req.TargetRole, Sections: map[string][]render.Entry{}}
	requestPart := func(key, section string) int {
		return addRecord(Record{SubjectKind: SubjectRequest, SubjectKey: key, Decision: Included, Section: section, Rule: "request"})
	}
	if t := req.Task; t != nil {
		doc.Task = &render.Task{TaskID: t.TaskID, StepID: t.StepID, StepAttempt: t.StepAttempt, Objective: t.Objective,
			AllowedOutcomes: t.AllowedOutcomes, PermissionCeiling: t.PermissionCeiling}
		doc.TaskRef = requestPart("task", "Task")
		doc.ObjectiveRef = requestPart("objective", "Objective")
	}
	if len(req.AcceptanceCriteria) > 0 {
		for _, c := range req.AcceptanceCriteria {
			doc.Criteria = append(doc.Criteria, render.Criterion(c))
		}
		doc.CriteriaRef = requestPart("criteria", "Acceptance Criteria")
	}
	if p := req.Plan; p != nil {
		doc.Plan = &render.Plan{PlanHash: p.PlanHash, ActiveStepIndex: p.ActiveStepIndex, TotalSteps: p.TotalSteps, SettledDecisions: p.SettledDecisions}
		doc.PlanRef = requestPart("plan", "Plan Pointer")
	}
	for i, p := range in.Predecessors {
		ref := addRecord(Record{SubjectKind: SubjectHandoff, SubjectKey: p.ID, Decision: Included, Section: "Predecessor Outputs", Rule: "predecessor", Position: i})
		doc.Predecessors = append(doc.Predecessors, render.Predecessor{
			Ref: ref, ID: p.ID, SourceRole: p.SourceRole, TargetRole: p.TargetRole, Status: p.Status, StepID: p.StepID,
			AttemptID: p.AttemptID, Summary: p.Summary, Decisions: p.Decisions, Artifacts: p.Artifacts, Verdicts: p.Verdicts,
			WitnessExitCode: p.WitnessExitCode, WitnessPassed: p.WitnessPassed,
		})
	}
	if req.AgentContext != nil {
		doc.AgentContext = req.AgentContext
		doc.AgentContextRef = requestPart("agent_context", render.CurrentState)
	}
	for i, c := range ranked {
		r := itemRecord(c, Included, "", "", false)
		r.Rank = i + 1
		c.section = sectionOf(c.v)
		r.Section = c.section
		c.ref = addRecord(r)
	}
	var losers []*cand
	for _, c := range survivors {
		if contradicted[c] {
			losers = append(losers, c)
		}
	}
	for _, c := range losers {
		w := c.loserOf
		c.ref = addRecord(itemRecord(c, Excluded, ReasonContradicted,
			fmt.Sprintf("contradicted by %s v%d on state_key %q (%s/%s/priority %d over %s/%s/priority %d)",
				w.v.Key, w.v.Version, c.v.StateKey, w.v.Authority, w.v.Confidence, w.v.Priority, c.v.Authority, c.v.Confidence, c.v.Priority), false))
	}
	slices.SortStableFunc(excluded, func(a, b Record) int {
		return cmp.Or(cmp.Compare(a.Reason, b.Reason), cmp.Compare(a.SubjectKey, b.SubjectKey), cmp.Compare(a.SubjectProject, b.SubjectProject))
	})
	for _, r := range excluded {
		addRecord(r)
	}

	// 7. Budget, then 8. render.
	res := &Result{Allocated: req.TokenBudget}
	count := func(s string) (int, error) { return token.Count(req.Tokenizer, s) }
	base, err := count(render.Text(render.Render(req.Format, doc)))
	if err != nil {
		return nil, err
	}
	included := make([]bool, len(ranked))
	if base > req.TokenBudget {
		res.Gaps = append(res.Gaps, Gap{Reason: "budget_exceeded_by_inviolable"})
	} else {
		used := base
		started := map[string]bool{}
		envStarted := false
		for i, c := range ranked {
			cost, err := entryCost(req, c)
			if err != nil {
				return nil, err
			}
			c.blockCost = cost
			if !started[c.section] {
				h, err := count(render.HeadingCost(req.Format, c.section, envStarted))
				if err != nil {
					return nil, err
				}
				cost += h
			}
			extraContra := 0
			for _, l := range c.losers {
				n, err := count(render.ContradictionCost(req.Format, contradiction(c, l)))
				if err != nil {
					return nil, err
				}
				extraContra += n
			}
			if extraContra > 0 && !started[render.ActiveContradictions] {
				h, err := count(render.HeadingCost(req.Format, render.ActiveContradictions, envStarted || render.IsEnv(c.section)))
				if err != nil {
					return nil, err
				}
				extraContra += h
			}
			c.needed, c.remaining = cost, req.TokenBudget-used
			if used+cost > req.TokenBudget {
				continue
			}
			// The winner of a contradiction brings its pair lines when they
			// fit too; when only the winner fits, the fact still goes in and
			// the pair is not listed (the loser's record still says why).
			c.listLosers = extraContra > 0 && used+cost+extraContra <= req.TokenBudget
			if !c.listLosers {
				extraContra = 0
			}
			used += cost + extraContra
			included[i] = true
			started[c.section] = true
			if render.IsEnv(c.section) {
				envStarted = true
			}
			if extraContra > 0 {
				started[render.ActiveContradictions] = true
				envStarted = true
			}
		}
	}
	renderCount := func() ([]render.Piece, string, int, error) {
		fillDoc(doc, ranked, included)
		pieces := render.Render(req.Format, doc)
		text := render.Text(pieces)
		n, err := count(text)
		return pieces, text, n, err
	}
	pieces, text, used, err := renderCount()
	if err != nil {
		return nil, err
	}
	// The sum of block counts is an estimate (a block's count alone can
	// differ by a token or two from its count in context); the whole text,
	// counted once, is the truth. Over budget: drop the lowest-ranked entry.
	for used > req.TokenBudget {
		last := -1
		for i := range ranked {
			if included[i] {
				last = i
			}
		}
		if last < 0 {
			break
		}
		included[last] = false
		if pieces, text, used, err = renderCount(); err != nil {
			return nil, err
		}
	}
	// Under budget with entries left out whose estimate only just missed:
	// try them, by rank, against the exact count. Bounded, so a packet is
	// never re-counted more than a few times.
	if len(res.Gaps) == 0 {
		tries := 0
		for i, c := range ranked {
			if included[i] || tries == maxFillTries {
				continue
			}
			if c.blockCost > req.TokenBudget-used+fillSlack {
				continue
			}
			tries++
			included[i] = true
			p2, t2, u2, err := renderCount()
			if err != nil {
				return nil, err
			}
			if u2 <= req.TokenBudget {
				pieces, text, used = p2, t2, u2
			} else {
				included[i] = false
			}
		}
		if tries > 0 {
			fillDoc(doc, ranked, included)
		}
	}
	res.Rendered, res.Used = text, used
	// 9. Records: spans and tokens of what went in.
	off := 0
	for _, p := range pieces {
		if p.Ref >= 0 {
			records[p.Ref].Span = &Span{Start: off, End: off + len(p.Text)}
			if records[p.Ref].SubjectKind != SubjectItem {
				records[p.Ref].Tokens, _ = count(p.Text)
			}
		}
		off += len(p.Text)
	}
	positions := map[string]int{}
	for i, c := range ranked {
		r := &records[c.ref]
		if included[i] {
			r.Position = positions[c.section]
			positions[c.section]++
			if c.blockCost == 0 {
				c.blockCost, _ = entryCost(req, c)
			}
			r.Tokens = c.blockCost
			if !storedCount(req, c) && r.Span != nil {
				// The budget's estimate includes separators; the record
				// counts exactly the bytes of its span.
				if r.Tokens, err = count(res.Rendered[r.Span.Start:r.Span.End]); err != nil {
					return nil, err
				}
			}
			continue
		}
		if c.blockCost == 0 {
			if c.blockCost, err = entryCost(req, c); err != nil {
				return nil, err
			}
		}
		r.Decision, r.Reason, r.Tokens = Excluded, ReasonBudget, c.blockCost
		if len(res.Gaps) > 0 && res.Gaps[0].Reason == "budget_exceeded_by_inviolable" {
			r.Detail = fmt.Sprintf("the task, criteria, plan, predecessors and host state alone exceed the budget of %d", req.TokenBudget)
		} else {
			r.Detail = fmt.Sprintf("needed %d tokens with its heading; %d of the budget of %d were left after higher-ranked entries", c.needed, c.remaining, req.TokenBudget)
		}
		res.Gaps = append(res.Gaps, Gap{Key: c.v.Key, Version: c.v.Version, Tokens: c.blockCost, Reason: ReasonBudget})
	}
	// A request part left out of the text (an empty objective) has no record.
	kept := records[:0]
	for _, r := range records {
		if r.SubjectKind == SubjectRequest && r.Span == nil {
			continue
		}
		kept = append(kept, r)
	}
	res.Records = kept
	return res, nil
}

// contradiction describes the pair of a winner and one loser.
func contradiction(w, l *cand) render.Contradiction {
	return render.Contradiction{Ref: l.ref, StateKey: l.v.StateKey,
		Kept: render.Entry{Key: w.v.Key, Version: w.v.Version}, KeptAuthority: w.v.Authority,
		Dropped: render.Entry{Key: l.v.Key, Version: l.v.Version}, DroppedAuthority: l.v.Authority}
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

// storedCount reports whether an entry's block count was stored with its
// version: markdown, untemplated, counted under the request's tokenizer.
func storedCount(req *Request, c *cand) bool {
	if req.Format != render.Markdown || c.v.Template {
		return false
	}
	if req.Tokenizer == token.Cl100kBase {
		return c.v.BlockTokens.Cl100k > 0
	}
	return c.v.BlockTokens.O200k > 0
}

// entryCost is the tokens of an entry's block: the count stored with the
// version for untemplated markdown, else counted now.
func entryCost(req *Request, c *cand) (int, error) {
	if storedCount(req, c) {
		if req.Tokenizer == token.Cl100kBase {
			return c.v.BlockTokens.Cl100k, nil
		}
		return c.v.BlockTokens.O200k, nil
	}
	e := render.Entry{Key: c.v.Key, Version: c.v.Version, Source: c.v.Source, Priority: c.v.Priority, Title: c.title, Content: c.content}
	return token.Count(req.Tokenizer, render.EntryCost(req.Format, e))
}

func itemRecord(c *cand, decision, reason, detail string, adminOnly bool) Record {
	return Record{
		SubjectKind: SubjectItem, SubjectProject: c.v.Project, SubjectKey: c.v.Key, SubjectVersion: c.v.Version,
		Decision: decision, Reason: reason, Detail: detail, Rule: c.rule, Layer: c.layer, AdminOnly: adminOnly,
		Kind: c.v.Kind, Source: c.v.Source,
	}
}

// sectionOf places an item: slot first, then kind, then layer.
func sectionOf(v *ctxtype.Version) string {
	switch {
	case v.Slot == "tools":
		return render.Tools
	case v.Slot == "messages":
		return render.Messages
	case v.Kind == "skill":
		return render.ActiveSkills
	case v.Kind == "state":
		return render.CurrentState
	case v.Project == SharedProject:
		return render.SharedDefaults
	}
	return render.ProjectKnowledge
}

// ValidAt reports whether t is inside the version's validity window.
func ValidAt(v *ctxtype.Version, t time.Time) bool {
	if v.ValidFrom != nil && t.Before(*v.ValidFrom) {
		return false
	}
	if v.ValidUntil != nil && !t.Before(*v.ValidUntil) {
		return false
	}
	return true
}

var authorityRank = map[string]int{"policy": 4, "instruction": 3, "evidence": 2, "hypothesis": 1}
var confidenceRank = map[string]int{"verified": 3, "probable": 2, "uncertain": 1}

// stronger orders contenders for one state key: authority, confidence,
// priority, then the newer version; key and project make it total.
func stronger(a, b *cand) int {
	return cmp.Or(
		-cmp.Compare(authorityRank[a.v.Authority], authorityRank[b.v.Authority]),
		-cmp.Compare(confidenceRank[a.v.Confidence], confidenceRank[b.v.Confidence]),
		-cmp.Compare(a.v.Priority, b.v.Priority),
		-a.v.CreatedAt.Compare(b.v.CreatedAt),
		cmp.Compare(a.v.Key, b.v.Key),
		cmp.Compare(a.v.Project, b.v.Project),
	)
}

// byRank is the packet's total order: pins, authority, priority,
// confidence, relevance score, the more recently written version, key.
func byRank(a, b *cand) int {
	pin := func(c *cand) int {
		if c.pinned {
			return 1
		}
		return 0
	}
	rel := func(c *cand) float64 {
		if c.relevance == nil {
			return -1
		}
		return *c.relevance
	}
	return cmp.Or(
		-cmp.Compare(pin(a), pin(b)),
		-cmp.Compare(authorityRank[a.v.Authority], authorityRank[b.v.Authority]),
		-cmp.Compare(a.v.Priority, b.v.Priority),
		-cmp.Compare(confidenceRank[a.v.Confidence], confidenceRank[b.v.Confidence]),
		-cmp.Compare(rel(a), rel(b)),
		-a.v.CreatedAt.Compare(b.v.CreatedAt),
		cmp.Compare(a.v.Key, b.v.Key),
		cmp.Compare(a.v.Project, b.v.Project),
	)
}

// fire decides whether a candidate's trigger fires for the request, and
// names the rule that did.
func fire(req *Request, v *ctxtype.Version, relevance *float64, pinned bool) (string, bool) {
	if pinned {
		return "pin", true
	}
	t := v.Trigger
	switch {
	case t.Always:
		return "always", true
	case t.Keywords != nil:
		for i, m := range req.History {
			if m.Author != "person" {
				continue
			}
			words := keyword.Words(m.Content)
			for _, k := range t.Keywords {
				if keyword.Contains(words, k) {
					return fmt.Sprintf("keyword:%s@history[%d]", render.JSONString(k), i), true
				}
			}
		}
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
// which trigger it has and what the request lacked.
func NotTriggered(req *Request, v *ctxtype.Version) string {
	t := v.Trigger
	switch {
	case t.Keywords != nil:
		return fmt.Sprintf("trigger keywords %q: no history message written by a person contains any of them", t.Keywords)
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

// maxFillTries and fillSlack bound the second pass of the budget: at most
// this many left-out entries are tried against the exact count, and only
// those whose estimate exceeds the headroom by at most fillSlack tokens.
const (
	maxFillTries = 8
	fillSlack    = 4
)

// RelevanceLimit is how many full-text matches the relevance trigger takes.
const RelevanceLimit = 50

var placeholderRE = regexp.MustCompile(`\{\{\s*([A-Za-z_][A-Za-z0-9_.]*)\s*\}\}`)

// templateVars returns the values placeholders may take: the closed set of
// built-ins, then the request's variables. Built-ins win, so a variable
// cannot pretend to be the project or the time.
func templateVars(in Input, req *Request) map[string]string {
	vars := map[string]string{}
	for k, v := range req.Variables {
		switch x := v.(type) {
		case string:
			vars[k] = x
		case json.Number:
			vars[k] = render.CanonicalNumber(x)
		case bool:
			vars[k] = strconv.FormatBool(x)
		case nil:
		default:
			b, _ := json.Marshal(x)
			vars[k] = string(b)
		}
	}
	vars["project"] = in.Project
	vars["target_role"] = req.TargetRole
	vars["now"] = in.Now.UTC().Format(time.RFC3339)
	if req.Task != nil && req.Task.Objective != "" {
		vars["task.objective"] = req.Task.Objective
	} else {
		delete(vars, "task.objective")
	}
	return vars
}

// fillTemplate replaces every {{name}}; names without a value are added to
// missing, and then the text must not be used.
func fillTemplate(s string, vars map[string]string, missing []string) (string, []string) {
	out := placeholderRE.ReplaceAllStringFunc(s, func(m string) string {
		name := placeholderRE.FindStringSubmatch(m)[1]
		if v, ok := vars[name]; ok {
			return v
		}
		if !slices.Contains(missing, name) {
			missing = append(missing, name)
		}
		return m
	})
	return out, missing
}
