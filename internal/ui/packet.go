package ui

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/outcome"
	"github.com/contextd/contextd/internal/packet"
	"github.com/contextd/contextd/internal/store"
)

// palette is how many section colours the stylesheet defines (sec-0 ...).
const palette = 8

// recordView is one record of a packet as the page shows it.
type recordView struct {
	Subject  string // data-record: item:project/key, request:part or handoff:id
	Kind     string
	Project  string // an item's project (_shared for shared items)
	Key      string
	Version  int
	Decision string
	Section  string
	Colour   int // the section's colour, sec-N
	Span     string
	Tokens   int
	Rank     int
	Rule     string
	Reason   string
	Detail   string
	Layer    string
}

// segment is a piece of the rendered text: a record's span, or the
// scaffolding between spans (Rec nil).
type segment struct {
	Text string
	Rec  *recordView
}

// budgetPart is one stretch of the budget bar (SVG user units of 1000).
type budgetPart struct {
	Label  string
	Tokens int
	Class  string
	X, W   float64
}

type packetView struct {
	P          *packet.Packet
	Segments   []segment
	Included   []recordView
	Excluded   []recordView
	Sections   []sectionView
	Budget     []budgetPart
	Headroom   int
	Replay     *packet.ReplayResult
	ReplayedAt string
	// Outcomes are the packet's outcomes, oldest first (all of them: a
	// packet has at most outcome.MaxPerPacket).
	Outcomes []store.Outcome
	// Suspects are its included entries ranked by the evidence that they
	// caused its failed or partial outcomes, as the outcome service
	// answers the session's agent (what it may not see is not there);
	// none without such an outcome.
	Suspects []outcome.Suspect
}

type sectionView struct {
	Name   string
	Colour int
	Tokens int
}

func subjectOf(r ctxtype.Record) string {
	if r.SubjectKind == ctxtype.SubjectItem {
		return "item:" + r.SubjectProject + "/" + r.SubjectKey
	}
	return r.SubjectKind + ":" + r.SubjectKey
}

func sectionName(r ctxtype.Record) string {
	if r.Reason == ctxtype.ReasonContradicted {
		return "Active Contradictions" // as packet.Sections names it
	}
	return r.Section
}

func (h *handler) packet(c echo.Context) error {
	return h.showPacket(c, nil)
}

// replay assembles the packet again from its snapshot (the replay
// service) and shows the page with the answer: identical, or how it differs.
func (h *handler) replay(c echo.Context) error {
	s := sessionOf(c)
	res, err := h.app.Packets.Replay(c.Request().Context(), s.Agent, param(c, "project"), param(c, "id"))
	if err != nil {
		return h.fail(c, err)
	}
	return h.showPacket(c, res)
}

func (h *handler) showPacket(c echo.Context, replay *packet.ReplayResult) error {
	s := sessionOf(c)
	proj := param(c, "project")
	p, err := h.app.Packets.Get(c.Request().Context(), s.Agent, proj, param(c, "id"))
	if err != nil {
		return h.fail(c, err)
	}
	v := buildPacketView(p)
	v.Replay = replay
	if v.Outcomes, _, err = h.app.Outcomes.List(c.Request().Context(), s.Agent, proj, p.ID, "", outcome.MaxPerPacket); err != nil {
		return h.fail(c, err)
	}
	if slices.ContainsFunc(v.Outcomes, failedOutcome) {
		if v.Suspects, err = h.app.Outcomes.Suspects(c.Request().Context(), s.Agent, proj, p.ID); err != nil {
			return h.fail(c, err)
		}
	}
	if err := h.nameAgents(c, p.CreatedBy); err != nil {
		return h.fail(c, err)
	}
	return h.render(c, http.StatusOK, "packet", "Packet "+p.ID, proj, v)
}

// failedOutcome is an outcome suspects explain. Without one the service
// answers no suspects, so the page spares the reads of its evidence.
func failedOutcome(o store.Outcome) bool {
	return o.Status == outcome.Failure || o.Status == outcome.Partial
}

// buildPacketView lays a packet out: sections coloured in order of
// appearance, the text cut into spans, the excluded records, the budget.
func buildPacketView(p *packet.Packet) *packetView {
	v := &packetView{P: p}
	colour := map[string]int{}
	tokens := map[string]int{}
	for _, sec := range p.Sections() {
		colour[sec.Name] = len(v.Sections) % palette
		v.Sections = append(v.Sections, sectionView{Name: sec.Name, Colour: colour[sec.Name]})
	}
	var spans []recordView
	for _, r := range p.Records {
		rv := recordView{Subject: subjectOf(r), Kind: r.SubjectKind, Project: r.SubjectProject, Key: r.SubjectKey, Version: r.SubjectVersion,
			Decision: r.Decision, Section: sectionName(r), Tokens: r.Tokens, Rank: r.Rank, Rule: r.Rule, Reason: r.Reason, Detail: r.Detail, Layer: r.Layer}
		rv.Colour = colour[rv.Section]
		if r.Span != nil {
			rv.Span = fmt.Sprintf("%d-%d", r.Span.Start, r.Span.End)
			spans = append(spans, rv)
		}
		if r.Decision == ctxtype.Included {
			v.Included = append(v.Included, rv)
			tokens[rv.Section] += r.Tokens
		} else {
			v.Excluded = append(v.Excluded, rv)
		}
	}
	for i := range v.Sections {
		v.Sections[i].Tokens = tokens[v.Sections[i].Name]
	}
	v.Segments = segments(p.Rendered, spans)
	v.Budget, v.Headroom = budgetBar(p.Allocated, p.Used, v.Sections)
	return v
}

// segments cuts rendered into the records' spans (UTF-8 byte offsets) and
// the text between them. A span that overlaps one already placed, or
// leaves the text, is not highlighted (its record is still listed).
func segments(rendered string, spans []recordView) []segment {
	type placed struct {
		start, end int
		rec        recordView
	}
	var ps []placed
	for _, r := range spans {
		var s, e int
		if _, err := fmt.Sscanf(r.Span, "%d-%d", &s, &e); err != nil || s < 0 || e > len(rendered) || s >= e {
			continue
		}
		ps = append(ps, placed{s, e, r})
	}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].start < ps[j].start })
	var out []segment
	at := 0
	for _, p := range ps {
		if p.start < at {
			continue
		}
		if p.start > at {
			out = append(out, segment{Text: rendered[at:p.start]})
		}
		rec := p.rec
		out = append(out, segment{Text: rendered[p.start:p.end], Rec: &rec})
		at = p.end
	}
	if at < len(rendered) {
		out = append(out, segment{Text: rendered[at:]})
	}
	return out
}

// budgetBar is the budget as stretches of a bar 1000 units wide: each
// section's tokens, the rest of what was used (headings, request parts
// without a section), and the headroom left.
func budgetBar(allocated, used int, secs []sectionView) ([]budgetPart, int) {
	total := max(allocated, used, 1)
	var parts []budgetPart
	x, inSections := 0.0, 0
	add := func(label, class string, n int) {
		if n <= 0 {
			return
		}
		w := 1000 * float64(n) / float64(total)
		parts = append(parts, budgetPart{Label: label, Tokens: n, Class: class, X: x, W: w})
		x += w
	}
	for _, s := range secs {
		add(s.Name, fmt.Sprintf("sec-%d", s.Colour), s.Tokens)
		inSections += s.Tokens
	}
	add("scaffolding", "scaffold", used-inSections)
	headroom := max(allocated-used, 0)
	add("headroom", "headroom", headroom)
	return parts, headroom
}

// recordDetail is what a click on a span shows: the record and, for an
// item, the version as it was when the packet was assembled.
type recordDetail struct {
	Project  string
	Rec      recordView
	Version  *ctxtype.Version
	SpanText string // the text of its span in the packet
	// Agents names the version's writer (the agent template function).
	Agents map[string]string
}

// record answers a click on a span (the page's script loads it into the
// side panel): the record named by ?subject= in the packet as this agent
// may see it, with its item version read through the item service.
func (h *handler) record(c echo.Context) error {
	s := sessionOf(c)
	ctx := c.Request().Context()
	proj := param(c, "project")
	p, err := h.app.Packets.Get(ctx, s.Agent, proj, param(c, "id"))
	if err != nil {
		return h.fail(c, err)
	}
	subject := c.QueryParam("subject")
	v := buildPacketView(p)
	var rec *recordView
	for _, list := range [][]recordView{v.Included, v.Excluded} {
		for i := range list {
			if list[i].Subject == subject && rec == nil {
				rec = &list[i]
			}
		}
	}
	if rec == nil {
		return h.fail(c, fmt.Errorf("%w: packet %s has no record of %s", packet.ErrNotFound, p.ID, subject))
	}
	d := recordDetail{Project: proj, Rec: *rec}
	if rec.Kind == ctxtype.SubjectItem {
		d.Version, err = h.app.Items.GetVersion(ctx, s.Agent, rec.Project, rec.Key, rec.Version)
		if err != nil {
			return h.fail(c, err)
		}
		if d.Agents, err = h.app.Agents.Names(ctx, []string{d.Version.CreatedBy}); err != nil {
			return h.fail(c, err)
		}
	}
	if rec.Span != "" {
		for _, seg := range v.Segments {
			if seg.Rec != nil && seg.Rec.Subject == subject {
				d.SpanText = strings.TrimRight(seg.Text, "\n")
			}
		}
	}
	return h.fragment(c, "record", d)
}
