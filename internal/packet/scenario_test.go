package packet_test

// The world the scenarios of bounded assembly (pipeline 2) run in: a store
// of their own, items written through the item service, packets assembled,
// read back, replayed and explained through the packet service, and the
// checks that hold for every packet whatever the scenario. These cases ran
// through the HTTP API (server/blackbox8_test.go); what the API adds — the
// answer's members, its size, status codes — is tested in internal/server.

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"github.com/tiktoken-go/tokenizer"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/assemble"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/packet"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/testfactory"
)

// tries is the number of candidates tried after the first budget miss.
const tries = 32

// world is a database of its own with an admin and the services.
type world struct {
	t     *testing.T
	pool  *pgxpool.Pool // for the read-only SQL of a precondition
	st    *store.Store
	svc   *app.App
	admin *auth.Agent
}

func newWorld(t *testing.T) *world {
	t.Helper()
	pool := pgtest.New(t)
	st := store.New(pool, 0)
	return &world{t: t, pool: pool, st: st, svc: app.New(st), admin: testfactory.Admin(t, st)}
}

func (w *world) project(name string) {
	w.t.Helper()
	testfactory.Project(w.t, w.st, &testfactory.ProjectOpts{Name: name, By: w.admin})
}

// reader is a read-only agent of role in proj.
func (w *world) reader(role, proj string) *auth.Agent {
	w.t.Helper()
	a, _ := testfactory.Agent(w.t, w.st, &testfactory.AgentOpts{Role: role, Permission: auth.ReadOnly, Projects: []string{proj}})
	return a
}

// spec is an item as a scenario writes it: only what it is about is set;
// the zero value of a field is the service's default.
type spec struct {
	Key, Content, Title, Kind, Slot, Source string
	Authority, Confidence, StateKey         string
	ValidFrom, ValidUntil                   string
	Priority                                int32
	Trigger                                 *ctxtype.Trigger
	Roles                                   *ctxtype.Roles
	Template                                bool
}

func opt(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (s spec) input() item.Input {
	in := item.Input{Key: s.Key, Content: s.Content, Title: opt(s.Title), Kind: opt(s.Kind), Slot: opt(s.Slot), Source: opt(s.Source),
		Authority: opt(s.Authority), Confidence: opt(s.Confidence), StateKey: opt(s.StateKey), ValidFrom: opt(s.ValidFrom),
		ValidUntil: opt(s.ValidUntil), Trigger: s.Trigger, Roles: s.Roles}
	if s.Priority != 0 {
		p := s.Priority
		in.Priority = &p
	}
	if s.Template {
		in.Template = &s.Template
	}
	return in
}

// Triggers and roles the scenarios use.
func keywords(ws ...string) *ctxtype.Trigger { return &ctxtype.Trigger{Keywords: ws} }
func tool(name string) *ctxtype.Trigger      { return &ctxtype.Trigger{Tool: &name} }
func relevance() *ctxtype.Trigger            { return &ctxtype.Trigger{Relevance: true} }
func pinnedOnly() *ctxtype.Trigger           { return &ctxtype.Trigger{PinnedOnly: true} }
func hiddenFrom(r string) *ctxtype.Roles     { return &ctxtype.Roles{HiddenFrom: []string{r}} }
func visibleTo(r string) *ctxtype.Roles      { return &ctxtype.Roles{VisibleTo: []string{r}} }

const past = "2020-01-01T00:00:00Z"

// batch writes items to a project in one batch, as admin.
func (w *world) batch(proj string, specs []spec) {
	w.t.Helper()
	ins := make([]item.Input, len(specs))
	for i, s := range specs {
		ins[i] = s.input()
	}
	_, err := w.svc.Items.Batch(w.t.Context(), w.admin, proj, ins)
	require.NoError(w.t, err)
}

// put writes one item, as admin.
func (w *world) put(proj string, s spec) {
	w.t.Helper()
	_, err := w.svc.Items.Put(w.t.Context(), w.admin, proj, s.input(), item.PutOpts{})
	require.NoError(w.t, err)
}

// del deletes one item, as admin.
func (w *world) del(proj, key string) {
	w.t.Helper()
	_, err := w.svc.Items.Delete(w.t.Context(), w.admin, proj, key, item.PutOpts{})
	require.NoError(w.t, err)
}

// assembled is a packet as its viewer got it, with the request it asked.
type assembled struct {
	*packet.Packet
	proj   string
	asked  ctxtype.Request // before Normalize filled the defaults
	viewer *auth.Agent
}

func (p assembled) cutCount() int {
	if p.Cutoff == nil {
		return 0
	}
	return p.Cutoff.Count
}

func (p assembled) cutRank() int {
	if p.Cutoff == nil {
		return 1 << 30
	}
	return p.Cutoff.Rank
}

// assemble asks for a packet as viewer.
func (w *world) assemble(proj string, viewer *auth.Agent, req ctxtype.Request) assembled {
	w.t.Helper()
	asked := req
	p, err := w.svc.Packets.Assemble(w.t.Context(), viewer, proj, &req)
	require.NoError(w.t, err)
	return assembled{Packet: p, proj: proj, asked: asked, viewer: viewer}
}

// get reads a stored packet as viewer.
func (w *world) get(proj string, viewer *auth.Agent, id string) *packet.Packet {
	w.t.Helper()
	p, err := w.svc.Packets.Get(w.t.Context(), viewer, proj, id)
	require.NoError(w.t, err)
	return p
}

func (w *world) replay(proj string, viewer *auth.Agent, id string) *packet.ReplayResult {
	w.t.Helper()
	rp, err := w.svc.Packets.Replay(w.t.Context(), viewer, proj, id)
	require.NoError(w.t, err)
	return rp
}

var codecs sync.Map

// tokens counts text with the real tokenizer, independently of contextd.
func tokens(t *testing.T, name, text string) int {
	t.Helper()
	if name == "" {
		name = "o200k_base"
	}
	c, ok := codecs.Load(name)
	if !ok {
		cc, err := tokenizer.Get(tokenizer.Encoding(name))
		require.NoError(t, err)
		c, _ = codecs.LoadOrStore(name, cc)
	}
	n, err := c.(tokenizer.Codec).Count(text)
	require.NoError(t, err)
	return n
}

// ikey names an item of a layer ("project" or "shared").
type ikey struct{ key, layer string }

func (k ikey) String() string { return k.layer + ":" + k.key }

func pk(keys ...string) []ikey {
	var out []ikey
	for _, k := range keys {
		out = append(out, ikey{k, "project"})
	}
	return out
}

func sk(keys ...string) []ikey {
	var out []ikey
	for _, k := range keys {
		out = append(out, ikey{k, "shared"})
	}
	return out
}

func layerOf(r ctxtype.Record) string {
	if r.Layer != "" {
		return r.Layer
	}
	if r.SubjectProject == ctxtype.SharedProject {
		return "shared"
	}
	return "project"
}

// itemRecords indexes a packet's item records by layer and key.
func itemRecords(recs []ctxtype.Record) map[ikey]ctxtype.Record {
	out := map[ikey]ctxtype.Record{}
	for _, r := range recs {
		if r.SubjectKind == ctxtype.SubjectItem {
			out[ikey{r.SubjectKey, layerOf(r)}] = r
		}
	}
	return out
}

func noneHidden(ikey) bool { return false }

// filler is a line of about n words.
func filler(i, n int) string {
	return fmt.Sprintf("Fact %d: %s", i, strings.Repeat("plain filler words ", n))
}

// ladder is n always-on items of about the same size in strict priority
// order (prefix.000 first), after one huge item that cannot fit.
func ladder(prefix string, n int) ([]spec, []ikey) {
	items := []spec{{Key: prefix + "huge", Content: strings.Repeat("word ", 400), Priority: 10000}}
	keys := pk(prefix + "huge")
	for i := range n {
		k := fmt.Sprintf("%s%03d", prefix, i)
		items = append(items, spec{Key: k, Content: fmt.Sprintf("ladder step %d", i), Priority: int32(5000 - 10*i)})
		keys = append(keys, ikey{k, "project"})
	}
	return items, keys
}

// check checks what holds for every packet as its viewer sees it, and
// returns the viewer's records (read back from the store).
func (w *world) check(p assembled) []ctxtype.Record {
	w.t.Helper()
	headroom, budgetGaps := checkBudget(w.t, p)
	stored := w.get(p.proj, p.viewer, p.ID)
	ranks, reasons, budgetRecs := checkRecords(w.t, p, stored.Records)
	checkCounts(w.t, p, headroom, ranks, reasons, budgetRecs, budgetGaps)
	w.checkStored(p, stored)
	return stored.Records
}

// checkBudget checks the budget's figures and returns the headroom and
// the budget gaps.
func checkBudget(t *testing.T, p assembled) (int, []ctxtype.Gap) {
	t.Helper()
	require.Equal(t, tokens(t, string(p.asked.Tokenizer), p.Rendered), p.Used, "used is the exact token count of rendered")
	headroom := p.Allocated - p.Used
	if p.asked.TokenBudget != 0 {
		require.Equal(t, p.asked.TokenBudget, p.Allocated)
	}
	inviolable := false
	var budgetGaps []ctxtype.Gap
	var pins []string
	for _, g := range p.Gaps {
		switch g.Reason {
		case "budget":
			budgetGaps = append(budgetGaps, g)
		case "budget_exceeded_by_inviolable":
			require.False(t, inviolable, "one inviolable gap")
			inviolable = true
		case assemble.GapPinUnresolved:
			require.Contains(t, p.asked.Pins, g.Key, "a pin gap names a pin")
			require.Equal(t, ctxtype.Gap{Key: g.Key, Reason: g.Reason}, g, "a pin gap says no more than its key")
			pins = append(pins, g.Key)
		default:
			t.Fatalf("unknown gap %+v", g)
		}
	}
	require.True(t, sort.StringsAreSorted(pins), "pin gaps in key order: %v", pins)
	for i := 1; i < len(pins); i++ {
		require.NotEqual(t, pins[i-1], pins[i], "a pin gap once")
	}
	if !inviolable {
		require.LessOrEqual(t, p.Used, p.Allocated, "used <= token_budget unless the request parts alone exceed it")
	}
	require.NotContains(t, p.Rendered, "{{", "a template is never half-filled")
	return headroom, budgetGaps
}

// checkRecords checks the records, the sections and the spans: returns
// the ranks of the tried items, the excluded records by reason and the
// budget exclusions.
func checkRecords(t *testing.T, p assembled, recs []ctxtype.Record) (map[int]string, map[string]int, []ctxtype.Record) {
	t.Helper()
	included := map[string]ctxtype.Record{}
	ranks := map[int]string{}
	var budgetRecs []ctxtype.Record
	reasons := map[string]int{}
	admin := p.viewer.IsAdmin()
	for _, r := range recs {
		if r.Span != nil {
			// Included entries, and the contradiction lines of losers.
			included[fmt.Sprintf("%s/%s/%s@%d", r.SubjectKind, r.SubjectProject, r.SubjectKey, r.Span.Start)] = r
		}
		if r.Decision == ctxtype.Included {
			require.NotNil(t, r.Span, "an included record has a span")
		} else {
			require.Equal(t, ctxtype.Excluded, r.Decision)
			reasons[r.Reason]++
			require.NotEqual(t, assemble.ReasonBudgetCutoff, r.Reason, "an untried candidate has no record")
		}
		if r.Reason == "budget" {
			budgetRecs = append(budgetRecs, r)
		}
		if r.SubjectKind == ctxtype.SubjectItem && r.Rank > 0 {
			k := r.SubjectProject + "/" + r.SubjectKey
			prev, dup := ranks[r.Rank]
			require.False(t, dup, "rank %d given to %s and %s", r.Rank, prev, k)
			ranks[r.Rank] = k
		}
		if !admin {
			require.NotEqual(t, "hidden", r.Reason, "only admins see hidden records")
		}
	}
	for i := 1; i <= len(ranks); i++ {
		require.Contains(t, ranks, i, "ranks of tried candidates are 1..n without holes (%d ranks)", len(ranks))
	}
	entries := 0
	var spans [][2]int
	for _, s := range p.Sections() {
		for _, entry := range s.Entries {
			start, end := entry.Span.Start, entry.Span.End
			require.True(t, start >= 0 && end > start && end <= len(p.Rendered), "span %+v of %v", *entry.Span, entry.SubjectKey)
			spans = append(spans, [2]int{start, end})
			entries++
			rec, ok := included[fmt.Sprintf("%s/%s/%s@%d", entry.SubjectKind, entry.SubjectProject, entry.SubjectKey, start)]
			require.True(t, ok, "section entry %+v has its included record", entry)
			require.Equal(t, rec.Span, entry.Span)
			require.Equal(t, rec.Tokens, entry.Tokens)
			require.Equal(t, rec.Rule, entry.Rule)
			require.Equal(t, rec.Decision, entry.Decision)
			if entry.Decision != ctxtype.Included {
				require.Equal(t, ctxtype.ReasonContradicted, entry.Reason, "only a contradiction line is an excluded entry")
			}
		}
	}
	require.Equal(t, len(included), entries, "every record with a span is a section entry")
	sort.Slice(spans, func(i, j int) bool { return spans[i][0] < spans[j][0] })
	for i := 1; i < len(spans); i++ {
		require.LessOrEqual(t, spans[i-1][1], spans[i][0], "spans %v and %v overlap", spans[i-1], spans[i])
	}
	return ranks, reasons, budgetRecs
}

// checkCounts checks the excluded counts, the cutoff and the gaps.
func checkCounts(t *testing.T, p assembled, headroom int, ranks map[int]string, reasons map[string]int, budgetRecs []ctxtype.Record, budgetGaps []ctxtype.Gap) {
	t.Helper()
	// Excluded counts are totals; the cutoff's count is excluded.budget_cutoff.
	excluded := p.Excluded()
	for reason, n := range reasons {
		require.Equal(t, n, excluded[reason], "excluded[%s] counts the viewer's records", reason)
	}
	for reason := range excluded {
		if reason != assemble.ReasonBudgetCutoff {
			require.Contains(t, reasons, reason, "excluded[%s] without records", reason)
		}
	}
	if !p.viewer.IsAdmin() {
		require.NotContains(t, excluded, "hidden")
	}
	sort.Slice(budgetRecs, func(i, j int) bool { return budgetRecs[i].Rank < budgetRecs[j].Rank })
	if p.Cutoff != nil {
		require.Positive(t, p.cutCount())
		require.Equal(t, p.cutCount(), excluded[assemble.ReasonBudgetCutoff])
		require.Equal(t, headroom, p.Cutoff.Headroom)
		require.NotEmpty(t, budgetRecs, "a cutoff follows a budget miss")
		first := budgetRecs[0].Rank
		require.Equal(t, first+tries+1, p.cutRank(), "exactly %d tried after the first miss at rank %d", tries, first)
		require.Equal(t, p.cutRank()-1, len(ranks), "the cutoff's rank follows the last tried")
	} else {
		require.NotContains(t, excluded, assemble.ReasonBudgetCutoff)
		if len(budgetRecs) > 0 {
			require.LessOrEqual(t, len(ranks)-budgetRecs[0].Rank, tries)
		}
	}
	// Gaps: the highest-ranked budget exclusions, at most 20, in rank order.
	require.LessOrEqual(t, len(budgetGaps), 20)
	require.Equal(t, min(20, len(budgetRecs)), len(budgetGaps))
	for i, g := range budgetGaps {
		require.Equal(t, budgetRecs[i].SubjectKey, g.Key, "gap %d", i)
		require.Equal(t, budgetRecs[i].Tokens, g.Tokens, "gap %d", i)
	}
	require.Equal(t, len(budgetRecs)+p.cutCount()-len(budgetGaps), p.GapsMore)
}

// checkStored checks that the stored packet answers the same, that it is
// a pipeline 2 packet and that it replays identically.
func (w *world) checkStored(p assembled, g *packet.Packet) {
	t := w.t
	t.Helper()
	require.Equal(t, p.Allocated, g.Allocated)
	require.Equal(t, p.Used, g.Used)
	require.Equal(t, p.Gaps, g.Gaps)
	require.Equal(t, p.GapsMore, g.GapsMore)
	require.Equal(t, p.Cutoff, g.Cutoff)
	require.Equal(t, p.Excluded(), g.Excluded())
	require.Equal(t, p.Rendered, g.Rendered)
	require.Equal(t, sectionsView(p.Packet), sectionsView(g))
	rp := w.replay(p.proj, p.viewer, p.ID)
	require.True(t, rp.Identical, "%+v", rp.Differences)
	require.Empty(t, rp.Differences)
	require.Equal(t, p.RenderedSHA256, rp.SHA256Now)
	require.Equal(t, assemble.Pipeline2, g.Pipeline, "new packets are pipeline 2")
}

// entryView is what a packet's answer shows of a section entry.
type entryView struct {
	Subject, Key, Project, Rule, Decision, Reason string
	Version, Tokens                               int
	Span                                          ctxtype.Span
}

// sectionsView is the sections as a packet's answer shows them.
func sectionsView(p *packet.Packet) map[string][]entryView {
	out := map[string][]entryView{}
	for _, s := range p.Sections() {
		for _, r := range s.Entries {
			out[s.Name] = append(out[s.Name], entryView{Subject: r.SubjectKind, Key: r.SubjectKey, Project: r.SubjectProject, Rule: r.Rule,
				Decision: r.Decision, Reason: r.Reason, Version: r.SubjectVersion, Tokens: r.Tokens, Span: *r.Span})
		}
	}
	return out
}
