package packet

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/contextd/contextd/internal/assemble"
	"github.com/contextd/contextd/internal/attribute"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/handoff"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/limits"
	"github.com/contextd/contextd/internal/page"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

// mayView reports whether agent may open a packet: admins open every packet
// of their projects, other agents the packets assembled for their own role
// (a packet holds what its role may see, not what theirs may). Injections
// and task histories name every packet (id, role, agent, time); packet
// listings, which carry counts, are per role too.
func mayView(agent *auth.Agent, targetRole string) bool {
	return agent.IsAdmin() || agent.Role == targetRole
}

func fromRow(r store.Packet) (*Packet, error) {
	req, err := assemble.DecodeRequest(r.Request)
	if err != nil {
		return nil, err
	}
	p := &Packet{
		ID: r.ID, Project: r.Project, CreatedAt: r.CreatedAt, CreatedBy: r.CreatedBy, TargetRole: r.TargetRole,
		TaskID: r.TaskID, Request: req, RequestRaw: r.Request, Rendered: r.Rendered,
		RenderedSHA256: hex.EncodeToString(r.RenderedSHA256), Tokenizer: r.Tokenizer, Format: r.Format,
		Allocated: r.TokenBudget, Used: r.TokensUsed, Snapshot: r.Snapshot,
	}
	if err := json.Unmarshal(r.Gaps, &p.Gaps); err != nil {
		return nil, fmt.Errorf("decode gaps: %w", err)
	}
	if err := json.Unmarshal(r.ProvenanceSummary, &p.Provenance); err != nil {
		return nil, fmt.Errorf("decode provenance: %w", err)
	}
	if err := json.Unmarshal(r.Predecessors, &p.Predecessors); err != nil {
		return nil, fmt.Errorf("decode predecessors: %w", err)
	}
	p.Pipeline, p.GapsMore, p.RenderVersion = r.Pipeline, r.GapsMore, r.RenderVersion
	if len(r.BudgetCutoff) > 0 {
		if err := json.Unmarshal(r.BudgetCutoff, &p.Cutoff); err != nil {
			return nil, fmt.Errorf("decode budget cutoff: %w", err)
		}
	}
	return p, nil
}

// Get returns a packet with the records the agent may see.
func (s *Service) Get(ctx context.Context, agent *auth.Agent, proj, id string) (*Packet, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return nil, err
	}
	row, err := s.store.PacketGet(ctx, proj, id)
	if err != nil {
		if errors.Is(err, fault.ErrNotFound) {
			return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
		}
		return nil, err
	}
	if !mayView(agent, row.TargetRole) {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, id)
	}
	p, err := fromRow(row)
	if err != nil {
		return nil, err
	}
	recs, err := s.store.PacketRecordList(ctx, proj, id)
	if err != nil {
		return nil, err
	}
	p.Records = append(p.Records, recs...)
	p.Records = visibleRecords(agent, p.Records)
	shown, err := s.withoutHiddenNow(ctx, agent, p.Records)
	if err != nil {
		return nil, err
	}
	if len(shown) < len(p.Records) {
		if err := s.withoutRecordsOf(ctx, p, shown); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// withheldSpans are the spans of the text whose records the caller may no
// longer see: attribute reports them as withheld, without their subject,
// instead of passing them off as scaffolding.
func (s *Service) withheldSpans(ctx context.Context, agent *auth.Agent, proj, id string, shown []assemble.Record) ([]assemble.Span, error) {
	if agent.SeesAllRoles() {
		return nil, nil
	}
	all, err := s.store.PacketRecordList(ctx, proj, id)
	if err != nil {
		return nil, err
	}
	seen := map[assemble.Span]bool{}
	for _, r := range shown {
		if r.Span != nil {
			seen[*r.Span] = true
		}
	}
	var out []assemble.Span
	for _, r := range all {
		if r.Span != nil && !seen[*r.Span] {
			seen[*r.Span] = true
			out = append(out, *r.Span)
		}
	}
	return out, nil
}

// withoutRecordsOf makes p's answer hold only the records shown: the
// unresolved gaps of the others, their share of the gaps not listed and of
// the provenance counts go too, computed as the packet is read.
func (s *Service) withoutRecordsOf(ctx context.Context, p *Packet, shown []assemble.Record) error {
	type id struct {
		key     string
		version int
	}
	kept, listed := map[id]bool{}, map[id]bool{}
	for _, r := range shown {
		kept[id{r.SubjectKey, r.SubjectVersion}] = true
	}
	gaps := p.Gaps[:0:0]
	for _, g := range p.Gaps {
		listed[id{g.Key, g.Version}] = true
		if g.Key == "" || kept[id{g.Key, g.Version}] {
			gaps = append(gaps, g)
		}
	}
	// Stored records do not carry kind and source; their versions do, read
	// in one query per layer.
	keys, versions := map[string][]string{}, map[string][]int32{}
	for _, r := range p.Records {
		if r.SubjectKind != assemble.SubjectItem || kept[id{r.SubjectKey, r.SubjectVersion}] {
			continue
		}
		if r.Reason == assemble.ReasonBudget && !listed[id{r.SubjectKey, r.SubjectVersion}] {
			p.GapsMore--
		}
		if r.Decision == assemble.Included {
			keys[r.SubjectProject] = append(keys[r.SubjectProject], r.SubjectKey)
			versions[r.SubjectProject] = append(versions[r.SubjectProject], int32(r.SubjectVersion))
		}
	}
	for layer, ks := range keys {
		got, err := s.store.ItemVersionKindSources(ctx, layer, ks, versions[layer])
		if err != nil {
			return err
		}
		for i, k := range ks {
			ksrc := got[store.VersionKey{Key: k, Version: int(versions[layer][i])}]
			uncount(p.Provenance.ByKind, ksrc.Kind)
			uncount(p.Provenance.BySource, ksrc.Source)
		}
	}
	p.Gaps, p.Records = gaps, shown
	return nil
}

func uncount(m map[string]int, k string) {
	if m[k]--; m[k] <= 0 {
		delete(m, k)
	}
}

// withoutHiddenNow drops, for a non-admin, the records of items that are
// hidden from its role now: such an item does not exist for it, on this
// endpoint as on every other (the packet's text stays what it was).
func (s *Service) withoutHiddenNow(ctx context.Context, agent *auth.Agent, records []assemble.Record) ([]assemble.Record, error) {
	hidden, err := s.hiddenNow(ctx, agent, records)
	if err != nil || len(hidden) == 0 {
		return records, err
	}
	return withoutHidden(records, hidden), nil
}

// hiddenNow is the (layer, key) of the items among records that are hidden
// from a non-admin's role now, read in one query per layer.
func (s *Service) hiddenNow(ctx context.Context, agent *auth.Agent, records []assemble.Record) (map[[2]string]bool, error) {
	if agent.SeesAllRoles() {
		return nil, nil
	}
	keys := map[string][]string{}
	for _, r := range records {
		if r.SubjectKind == assemble.SubjectItem && !slices.Contains(keys[r.SubjectProject], r.SubjectKey) {
			keys[r.SubjectProject] = append(keys[r.SubjectProject], r.SubjectKey)
		}
	}
	hidden := map[[2]string]bool{}
	for layer, ks := range keys {
		rows, err := s.store.ItemVersionCurrentMany(ctx, layer, ks)
		if err != nil {
			return nil, err
		}
		for _, row := range rows {
			if !row.Roles.Visible(agent.Role) {
				hidden[[2]string{layer, row.Key}] = true
			}
		}
	}
	return hidden, nil
}

func withoutHidden(records []assemble.Record, hidden map[[2]string]bool) []assemble.Record {
	out := records[:0:0]
	for _, r := range records {
		if r.SubjectKind != assemble.SubjectItem || !hidden[[2]string{r.SubjectProject, r.SubjectKey}] {
			out = append(out, r)
		}
	}
	return out
}

// summariesNow makes a non-admin's page of packet summaries leave out what
// is hidden from its role now (gaps, counts), as Get does for one packet:
// the page's records are read in one query, and their items' visibility in
// one query per layer for the whole page.
func (s *Service) summariesNow(ctx context.Context, agent *auth.Agent, proj string, ps []*Packet) error {
	if agent.SeesAllRoles() || len(ps) == 0 {
		return nil
	}
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	recs, err := s.store.PacketRecordListMany(ctx, proj, ids)
	if err != nil {
		return err
	}
	var all []assemble.Record
	for _, p := range ps {
		p.Records = visibleRecords(agent, recs[p.ID])
		all = append(all, p.Records...)
	}
	hidden, err := s.hiddenNow(ctx, agent, all)
	if err != nil {
		return err
	}
	for _, p := range ps {
		if shown := withoutHidden(p.Records, hidden); len(shown) < len(p.Records) {
			if err := s.withoutRecordsOf(ctx, p, shown); err != nil {
				return err
			}
		}
		p.Records = nil // a summary carries no records
	}
	return nil
}

// ListParams filters a listing of packets.
type ListParams struct {
	TaskID, TargetRole, Agent string
	Since                     *time.Time
	Cursor                    string
	Limit                     int
}

// packetsListing and injectionsListing name the listings a cursor belongs
// to: a project's packets; the packets of project of that used an item
// (its project and key), so a cursor of another item's or project's
// listing is refused, not read as a position in this one.
func packetsListing(proj string) string { return page.Listing("packets", proj) }
func injectionsListing(of, proj, key string) string {
	return page.Listing("injections", of, proj, key)
}

// List returns packets newest first (without their records).
func (s *Service) List(ctx context.Context, agent *auth.Agent, proj string, lp ListParams) ([]*Packet, string, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return nil, "", err
	}
	cur, err := page.DecodeAt(lp.Cursor, packetsListing(proj))
	if err != nil {
		return nil, "", err
	}
	// A packet's summary (budget, counts by kind and source) describes what
	// its role saw: non-admins list the packets of their own role.
	role := lp.TargetRole
	if !agent.IsAdmin() {
		if lp.TargetRole != "" && lp.TargetRole != agent.Role {
			return nil, "", nil
		}
		role = agent.Role
	}
	params := store.PacketListParams{Project: proj, TaskID: lp.TaskID, TargetRole: role, Agent: lp.Agent, Since: lp.Since, Max: lp.Limit + 1}
	if cur != nil {
		params.HasCursor, params.CursorTime, params.CursorID = true, cur.T, cur.ID
	}
	rows, err := s.store.PacketList(ctx, params)
	if err != nil {
		return nil, "", err
	}
	var out []*Packet
	next := ""
	for i, r := range rows {
		if i == lp.Limit {
			last := rows[i-1]
			next = page.Encode(packetsListing(proj), page.At{T: last.CreatedAt, ID: last.ID})
			break
		}
		p, err := fromRow(r)
		if err != nil {
			return nil, "", err
		}
		out = append(out, p)
	}
	if err := s.summariesNow(ctx, agent, proj, out); err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// WhyAnswer explains one item's fate in one packet.
type WhyAnswer struct {
	Decision string // included, excluded, not_candidate
	Record   *assemble.Record
	Reason   string
	Detail   string
	Item     *item.Version // the version as it was then; nil if it did not exist
	// Cutoff is the packet's cutoff, for a candidate past it.
	Cutoff *assemble.Cutoff
	// Redaction, when that version's content was redacted since: who, when
	// and why.
	Redaction *store.Redaction
	// ContextPacket is the request's context packet asked about, as sent.
	ContextPacket json.RawMessage
}

// Why answers "why did (or didn't) this packet contain this item?". The
// answer for an item the packet recorded comes from its record; for any
// other item it is worked out now from the stored request and snapshot.
func (s *Service) Why(ctx context.Context, agent *auth.Agent, proj, id, key, layer string) (*WhyAnswer, error) {
	a, err := s.why(ctx, agent, proj, id, key, layer)
	if err != nil || a.Item == nil {
		return a, err
	}
	rs, err := s.store.RedactionsOf(ctx, a.Item.Project, []string{a.Item.Key}, []int32{int32(a.Item.Version)})
	if err != nil {
		return nil, err
	}
	if len(rs) > 0 {
		a.Redaction = &rs[0]
		a.Detail = strings.TrimSpace(a.Detail + " The version's content was " + redactedText(rs[0]) + ".")
	}
	return a, nil
}

func (s *Service) why(ctx context.Context, agent *auth.Agent, proj, id, key, layer string) (*WhyAnswer, error) {
	p, err := s.Get(ctx, agent, proj, id)
	if err != nil {
		return nil, err
	}
	if !item.ValidKey(key) {
		return nil, validation.One("item", "format", "item must be an item key")
	}
	if layer != "" && layer != "project" && layer != "shared" {
		return nil, validation.One("layer", "enum", "layer must be project or shared")
	}
	rows, err := s.store.SnapshotVersions(ctx, []string{proj, assemble.SharedProject}, key, p.Snapshot)
	if err != nil {
		return nil, err
	}
	then := map[string]*item.Version{}
	for _, r := range rows {
		then[r.Project] = r
	}
	// An item the caller may not see now is hidden here, whatever it was
	// when the packet was made.
	visibleNow := func(layer string) (bool, error) {
		if agent.SeesAllRoles() {
			return true, nil
		}
		cur, err := s.store.ItemVersionCurrent(ctx, layer, key)
		if err != nil {
			if errors.Is(err, fault.ErrNotFound) {
				return true, nil
			}
			return false, err
		}
		return cur.Roles.Visible(agent.Role), nil
	}
	visible := func(v *item.Version) bool {
		if !agent.SeesAllRoles() && !v.Roles.Visible(agent.Role) {
			return false
		}
		ok, err := visibleNow(v.Project)
		return ok && err == nil
	}

	// An item the caller may not see (then, or now) does not exist for it:
	// it is answered exactly as a key that never existed, so that why
	// tells a hidden key from a free one no more than a packet does.
	for layer, v := range then {
		if !visible(v) {
			delete(then, layer)
		}
	}
	didNotExist := &WhyAnswer{Decision: "not_candidate", Reason: "did_not_exist",
		Detail: fmt.Sprintf("no item %q existed in %s or _shared when the packet was assembled", key, proj)}

	// The item asked about is the project's unless the layer says shared,
	// or the project had none the caller may see (or a tombstone where
	// _shared had one): then the _shared item is the one that could reach
	// the packet.
	target := proj
	pv, sv := then[proj], then[assemble.SharedProject]
	if layer == "shared" || pv == nil || (pv.Deleted && sv != nil && !sv.Deleted) {
		target = assemble.SharedProject
	}
	if rec := recordOf(p, key, target); rec != nil {
		v, err := s.store.ItemVersionGet(ctx, rec.SubjectProject, key, rec.SubjectVersion)
		if err != nil {
			return nil, err
		}
		if !visible(v) {
			return didNotExist, nil
		}
		return &WhyAnswer{Decision: rec.Decision, Record: rec, Reason: rec.Reason, Detail: rec.Detail, Item: v}, nil
	}

	// Not recorded: past the budget's cutoff, or it was no candidate, or
	// it did not fire.
	v := then[target]
	if ans, err := s.whyUntried(ctx, proj, p, key, target, v); err != nil || ans != nil {
		return ans, err
	}
	if v == nil {
		return didNotExist, nil
	}
	return s.whyNotCandidate(ctx, agent, p, v)
}

// whyNotCandidate explains an item that was in the snapshot but not a
// candidate of the packet: a tombstone, outside its window, or its trigger
// did not fire.
func (s *Service) whyNotCandidate(ctx context.Context, agent *auth.Agent, p *Packet, v *item.Version) (*WhyAnswer, error) {
	ans := &WhyAnswer{Decision: "not_candidate", Item: v}
	switch {
	case v.Deleted:
		ans.Reason, ans.Detail = "tombstoned", fmt.Sprintf("version %d, current then, is a tombstone", v.Version)+retiredBy(v.Metadata)
	case !assemble.ValidAt(v, p.CreatedAt):
		ans.Reason, ans.Detail = "not_valid", fmt.Sprintf("its validity window %s does not hold the packet's time %s", window(v), p.CreatedAt.Format(time.RFC3339Nano))
	case !agent.SeesAllRoles() || v.Roles.Visible(p.TargetRole):
		ans.Reason, ans.Detail = "not_triggered", assemble.NotTriggered(p.Request, v)
		if v.Trigger.Relevance && strings.TrimSpace(p.Request.Query) != "" {
			matched, err := s.store.ItemVersionMatches(ctx, v, p.Request.Query)
			if err != nil {
				return nil, err
			}
			if !matched {
				ans.Detail = fmt.Sprintf("trigger relevance: the query %q shares no word with it (after english stemming and stop words)", p.Request.Query)
			}
		}
	default:
		// Only an admin gets here: hidden from the packet's role, and its
		// trigger did not fire either.
		ans.Reason, ans.Detail = "not_triggered", assemble.NotTriggered(p.Request, v)+fmt.Sprintf("; it is also hidden from role %q", p.TargetRole)
	}
	return ans, nil
}

// whyUntried explains an item a pipeline 2 packet has no record of when
// its budget stopped before the end: the pipeline runs again on the
// packet's snapshot, goes on past the cutoff without trying the budget,
// and says what would have excluded the item first, or that it ranked
// after the cutoff. Nil when the item was no candidate at all.
func (s *Service) whyUntried(ctx context.Context, proj string, p *Packet, key, explain string, v *item.Version) (*WhyAnswer, error) {
	if p.Pipeline < assemble.Pipeline2 || p.Cutoff == nil || v == nil || v.Deleted {
		return nil, nil
	}
	src, err := s.snapshotSource(ctx, proj, p)
	if err != nil {
		return nil, err
	}
	in := assemble.Input{Project: proj, PacketID: p.ID, Request: p.Request, Now: p.CreatedAt, Predecessors: p.Predecessors, Render: p.RenderVersion}
	_, why, err := assemble.AssembleBounded(ctx, in, src, assemble.Options{ExplainLayer: explain, ExplainKey: key, Stages: s.stages})
	if err != nil || why == nil {
		return nil, err
	}
	rec := &assemble.Record{SubjectKind: assemble.SubjectItem, SubjectProject: explain, SubjectKey: key, SubjectVersion: v.Version,
		Decision: assemble.Excluded, Reason: why.Reason, Detail: why.Detail, Rank: why.Rank, Rule: why.Rule,
		Layer: assemble.LayerOf(explain), Kind: v.Kind, Source: v.Source}
	return &WhyAnswer{Decision: assemble.Excluded, Record: rec, Reason: why.Reason, Detail: why.Detail, Item: v, Cutoff: p.Cutoff}, nil
}

// snapshotSource is pipeline 2's source as of a packet's snapshot: every
// current version it saw, and the relevance weights of its relevance
// items, computed as the write path computes them.
func (s *Service) snapshotSource(ctx context.Context, proj string, p *Packet) (*assemble.MemorySource, error) {
	layers := []string{proj, assemble.SharedProject}
	vs, err := s.store.SnapshotVersions(ctx, layers, "", p.Snapshot)
	if err != nil {
		return nil, err
	}
	src := &assemble.MemorySource{Versions: vs}
	if strings.TrimSpace(p.Request.Query) != "" {
		if src.Lexemes, err = s.store.QueryLexemes(ctx, p.Request.Query, assemble.MaxQueryLexemes); err != nil {
			return nil, err
		}
		if src.Weights, err = s.store.SnapshotTerms(ctx, layers, p.Snapshot); err != nil {
			return nil, err
		}
	}
	return src, nil
}

// replayed assembles a stored packet's request again, on its snapshot, with
// the pipeline that made it.
func (s *Service) replayed(ctx context.Context, proj string, p *Packet) (*assemble.Result, error) {
	in := assemble.Input{Project: proj, PacketID: p.ID, Request: p.Request, Now: p.CreatedAt, Predecessors: p.Predecessors, Render: p.RenderVersion}
	if p.Pipeline < assemble.Pipeline2 {
		cands, err := s.snapshotCandidates(ctx, proj, p)
		if err != nil {
			return nil, fmt.Errorf("load snapshot: %w", err)
		}
		in.Candidates = cands
		return assemble.Assemble(in)
	}
	src, err := s.snapshotSource(ctx, proj, p)
	if err != nil {
		return nil, fmt.Errorf("load snapshot: %w", err)
	}
	res, _, err := assemble.AssembleBounded(ctx, in, src, assemble.Options{Stages: s.stages})
	return res, err
}

// recordOf is the packet's record of an item of a layer.
func recordOf(p *Packet, key, layer string) *assemble.Record {
	for i := range p.Records {
		r := &p.Records[i]
		if r.SubjectKind == assemble.SubjectItem && r.SubjectKey == key && r.SubjectProject == layer {
			return r
		}
	}
	return nil
}

func window(v *item.Version) string {
	f, u := "-∞", "+∞"
	if v.ValidFrom != nil {
		f = v.ValidFrom.Format(time.RFC3339Nano)
	}
	if v.ValidUntil != nil {
		u = v.ValidUntil.Format(time.RFC3339Nano)
	}
	return "[" + f + ", " + u + ")"
}

// Match is one range of the rendered text and what it came from.
type Match struct {
	Start, End int
	// Kind is how the text was found (attribute.Exact, Normalized or
	// Passage), Similarity its share of the text asked about.
	Kind       string
	Similarity float64
	Records    []assemble.Record
	// Withheld are the spans over the range whose records the caller may
	// no longer see (an item hidden from its role since).
	Withheld    []assemble.Span
	Scaffolding []assemble.Span // the parts of the range no record covers
}

// AttributeParams names the text to explain: every occurrence of Text, or
// the byte range [Start, End).
type AttributeParams struct {
	Text       *string
	Start, End *int
}

// Attribute says which records each occurrence of a text (or a byte range)
// of the rendered packet came from, and which parts are scaffolding.
func (s *Service) Attribute(ctx context.Context, agent *auth.Agent, proj, id string, ap AttributeParams) ([]Match, error) {
	_, ms, err := s.attribute(ctx, agent, proj, id, ap)
	return ms, err
}

// attribute is Attribute, with the packet it read.
func (s *Service) attribute(ctx context.Context, agent *auth.Agent, proj, id string, ap AttributeParams) (*Packet, []Match, error) {
	p, err := s.Get(ctx, agent, proj, id)
	if err != nil {
		return nil, nil, err
	}
	var found []attribute.Match
	switch {
	case ap.Text != nil && (ap.Start != nil || ap.End != nil):
		return nil, nil, validation.One("", "invalid", "give either text or start and end, not both")
	case ap.Text != nil:
		if *ap.Text == "" {
			return nil, nil, validation.One("/text", "required", "text must not be empty")
		}
		var errs validation.List
		limits.Bytes(&errs, "/text", len(*ap.Text), limits.Get().Message)
		if err := errs.Err(); err != nil {
			return nil, nil, err
		}
		found = attribute.Find(p.Rendered, *ap.Text)
		if len(found) == 0 {
			return nil, nil, &TextNotFound{PacketID: id}
		}
	case ap.Start != nil && ap.End != nil:
		if *ap.Start < 0 || *ap.End > len(p.Rendered) || *ap.Start >= *ap.End {
			return nil, nil, validation.One("/start", "range", "need 0 <= start < end <= %d (the rendered length in bytes)", len(p.Rendered))
		}
		if !utf8.RuneStart(p.Rendered[*ap.Start]) || (*ap.End < len(p.Rendered) && !utf8.RuneStart(p.Rendered[*ap.End])) {
			return nil, nil, validation.One("/start", "range", "start and end must not cut a UTF-8 character")
		}
		found = []attribute.Match{{Start: *ap.Start, End: *ap.End, Kind: attribute.Exact, Similarity: 1}}
	default:
		return nil, nil, validation.One("/text", "required", "give text, or start and end")
	}
	withheld, err := s.withheldSpans(ctx, agent, proj, id, p.Records)
	if err != nil {
		return nil, nil, err
	}
	var out []Match
	for _, f := range found {
		rg := [2]int{f.Start, f.End}
		m := Match{Start: rg[0], End: rg[1], Kind: f.Kind, Similarity: f.Similarity, Records: []assemble.Record{}, Scaffolding: []assemble.Span{}}
		covered := make([]bool, rg[1]-rg[0])
		cover := func(sp assemble.Span) bool {
			if sp.End <= rg[0] || sp.Start >= rg[1] {
				return false
			}
			for i := max(sp.Start, rg[0]); i < min(sp.End, rg[1]); i++ {
				covered[i-rg[0]] = true
			}
			return true
		}
		for _, r := range p.Records {
			if r.Span != nil && cover(*r.Span) {
				m.Records = append(m.Records, r)
			}
		}
		for _, sp := range withheld {
			if cover(sp) {
				m.Withheld = append(m.Withheld, sp)
			}
		}
		for i := 0; i < len(covered); {
			if covered[i] {
				i++
				continue
			}
			j := i
			for j < len(covered) && !covered[j] {
				j++
			}
			m.Scaffolding = append(m.Scaffolding, assemble.Span{Start: rg[0] + i, End: rg[0] + j})
			i = j
		}
		out = append(out, m)
	}
	return p, out, nil
}

// TaskMatch is the best match of a text in one packet of a task.
type TaskMatch struct {
	PacketID  string
	CreatedAt time.Time
	Text      string // the matched text of the packet
	Match
}

// MaxTaskPackets is how many of a task's packets, newest first, a task
// attribute looks through.
const MaxTaskPackets = 100

// AttributeTask looks for text in every packet of a task that the agent may
// open (its newest MaxTaskPackets), and answers each packet's best match,
// best first (similarity, then the longer match), then newest first.
func (s *Service) AttributeTask(ctx context.Context, agent *auth.Agent, proj, taskID, text string) ([]TaskMatch, error) {
	if strings.TrimSpace(taskID) == "" {
		return nil, validation.One("task_id", "required", "task_id is required")
	}
	ps, _, err := s.List(ctx, agent, proj, ListParams{TaskID: taskID, Limit: MaxTaskPackets})
	if err != nil {
		return nil, err
	}
	out := []TaskMatch{}
	for _, sum := range ps {
		p, ms, err := s.attribute(ctx, agent, proj, sum.ID, AttributeParams{Text: &text})
		var tnf *TextNotFound
		switch {
		case errors.As(err, &tnf):
			continue
		case err != nil:
			return nil, err
		}
		best := ms[0]
		for _, m := range ms[1:] {
			if m.Similarity > best.Similarity {
				best = m
			}
		}
		out = append(out, TaskMatch{PacketID: sum.ID, CreatedAt: sum.CreatedAt, Text: p.Rendered[best.Start:best.End], Match: best})
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Similarity != b.Similarity {
			return a.Similarity > b.Similarity
		}
		return a.End-a.Start > b.End-b.Start
	})
	return out, nil
}

// TextNotFound is an attribute whose text the packet's prompt does not
// hold, not even in part: 404 with reason text_not_found (the packet
// exists).
type TextNotFound struct{ PacketID string }

func (e *TextNotFound) Error() string {
	return fmt.Sprintf("the text was not found in packet %s, not even %d consecutive words of it", e.PacketID, attribute.MinPassage)
}

// Is makes a TextNotFound a not-found.
func (e *TextNotFound) Is(target error) bool { return target == fault.ErrNotFound }

// Injection is one packet that included an item.
type Injection struct {
	PacketID, Project, TargetRole, Agent, Section, Rule string
	Version                                             int
	CreatedAt                                           time.Time
}

// InjectionParams filters the reverse lookup.
type InjectionParams struct {
	// Project is the project whose packets to list: for a _shared item,
	// required when the caller may see more than one project.
	Project      string
	Version      *int
	Since, Until *time.Time
	Cursor       string
	Limit        int
}

// Injections lists every packet of one project that included an item,
// newest first: what a user needs to recall a bad fact. It reads one page
// of an index in that order, whatever the item's uses. For a _shared item
// the project is the one named, or the caller's only project; it is
// returned.
func (s *Service) Injections(ctx context.Context, agent *auth.Agent, proj, key string, ip InjectionParams) ([]Injection, string, string, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return nil, "", "", err
	}
	if !item.ValidKey(key) {
		return nil, "", "", fmt.Errorf("%w: %s", item.ErrNotFound, key)
	}
	cur, err := s.store.ItemVersionCurrent(ctx, proj, key)
	if err != nil {
		if errors.Is(err, fault.ErrNotFound) {
			return nil, "", "", fmt.Errorf("%w: %s", item.ErrNotFound, key)
		}
		return nil, "", "", err
	}
	if !agent.SeesAllRoles() && !cur.Roles.Visible(agent.Role) {
		return nil, "", "", fmt.Errorf("%w: %s", item.ErrNotFound, key)
	}
	of, err := s.injectionsProject(ctx, agent, proj, ip.Project)
	if err != nil {
		return nil, "", "", err
	}
	c, err := page.DecodeAt(ip.Cursor, injectionsListing(of, proj, key))
	if err != nil {
		return nil, "", "", err
	}
	params := store.InjectionListParams{
		Project: of, SubjectProject: proj, SubjectKey: key, Version: ip.Version, Since: ip.Since, Until: ip.Until, Max: ip.Limit + 1,
	}
	if c != nil {
		params.HasCursor, params.CursorTime, params.CursorID = true, c.T, c.ID
	}
	rows, err := s.store.InjectionList(ctx, params)
	if err != nil {
		return nil, "", "", err
	}
	var out []Injection
	next := ""
	for i, r := range rows {
		if i == ip.Limit {
			last := rows[i-1]
			next = page.Encode(injectionsListing(of, proj, key), page.At{T: last.CreatedAt, ID: last.PacketID})
			break
		}
		out = append(out, Injection{PacketID: r.PacketID, Project: r.Project, TargetRole: r.TargetRole, Agent: r.CreatedBy,
			Section: r.Section, Rule: r.Rule, Version: r.SubjectVersion, CreatedAt: r.CreatedAt})
	}
	return out, next, of, nil
}

// injectionsProject is the project whose packets a reverse lookup lists:
// a project's own item's, or for a _shared item the one named (which the
// caller must see) or the caller's only project.
func (s *Service) injectionsProject(ctx context.Context, agent *auth.Agent, proj, named string) (string, error) {
	if proj != assemble.SharedProject {
		if named != "" && named != proj {
			return "", validation.One("project", "invalid", "project names the project whose packets to list for a _shared item; for an item of %s it is %s or absent", proj, proj)
		}
		return proj, nil
	}
	if named != "" {
		if named == assemble.SharedProject {
			return "", validation.One("project", "invalid", "no packets are assembled in _shared: name the project whose packets to list")
		}
		if err := s.projects.Authorize(ctx, agent, named, auth.ReadOnly); err != nil {
			return "", err
		}
		return named, nil
	}
	visible, err := s.projects.List(ctx, agent, "", 2+1)
	if err != nil {
		return "", err
	}
	var mine []string
	for _, vp := range visible {
		if vp.Name != assemble.SharedProject {
			mine = append(mine, vp.Name)
		}
	}
	switch len(mine) {
	case 1:
		return mine[0], nil
	case 0:
		return "", validation.One("project", "required", "the caller may see no project whose packets could have used this _shared item")
	}
	return "", validation.One("project", "required", "a _shared item is used by the packets of every project: name the one to list with ?project=")
}

// ReplayResult compares a packet with its replay.
type ReplayResult struct {
	Identical   bool
	SHA256Then  string
	SHA256Now   string
	Differences []Difference
	// Redacted: a version the packet included was redacted since, so the
	// packet cannot be made again as it was (Differences say which).
	Redacted bool
}

// redactionsIn are the redactions of the item versions records include.
func (s *Service) redactionsIn(ctx context.Context, records []assemble.Record) ([]store.Redaction, error) {
	type kv struct {
		keys     []string
		versions []int32
	}
	by := map[string]*kv{}
	var projects []string
	for _, r := range records {
		if r.SubjectKind != assemble.SubjectItem || r.Decision != "included" {
			continue
		}
		if by[r.SubjectProject] == nil {
			by[r.SubjectProject] = &kv{}
			projects = append(projects, r.SubjectProject)
		}
		by[r.SubjectProject].keys = append(by[r.SubjectProject].keys, r.SubjectKey)
		by[r.SubjectProject].versions = append(by[r.SubjectProject].versions, int32(r.SubjectVersion))
	}
	var out []store.Redaction
	for _, p := range projects {
		rs, err := s.store.RedactionsOf(ctx, p, by[p].keys, by[p].versions)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// redactedText says who redacted a version, when and why.
func redactedText(r store.Redaction) string {
	return fmt.Sprintf("redacted (%s) by %s at %s: %s", r.ID, r.CreatedBy, r.CreatedAt.Format(time.RFC3339), r.Reason)
}

// Difference is one way a replay differs from the stored packet.
type Difference struct {
	Subject string `json:"subject"`
	Then    string `json:"then"`
	Now     string `json:"now"`
}

// Replay assembles the stored request again against exactly the versions
// the packet read (its snapshot) at its own time, and compares. Nothing is
// stored.
func (s *Service) Replay(ctx context.Context, agent *auth.Agent, proj, id string) (*ReplayResult, error) {
	p, err := s.Get(ctx, agent, proj, id)
	if err != nil {
		return nil, err
	}
	res, err := s.replayed(ctx, proj, p)
	if err != nil {
		return nil, err
	}
	nowRecords, err := s.withoutHiddenNow(ctx, agent, visibleRecords(agent, res.Records))
	if err != nil {
		return nil, err
	}
	now := Packet{Rendered: res.Rendered, Records: nowRecords}
	out := &ReplayResult{SHA256Then: p.RenderedSHA256, SHA256Now: sha(res.Rendered), Differences: []Difference{}}
	out.Identical = out.SHA256Then == out.SHA256Now
	describe := func(r assemble.Record) string {
		s := r.Decision
		if r.Reason != "" {
			s += ":" + r.Reason
		}
		if r.SubjectKind == assemble.SubjectItem {
			s += fmt.Sprintf(" v%d", r.SubjectVersion)
		}
		if r.Span != nil {
			s += fmt.Sprintf(" [%d,%d)", r.Span.Start, r.Span.End)
		}
		return s
	}
	subject := func(r assemble.Record) string {
		if r.SubjectKind == assemble.SubjectItem {
			return "item:" + r.SubjectProject + "/" + r.SubjectKey
		}
		return r.SubjectKind + ":" + r.SubjectKey
	}
	thenBy := map[string]string{}
	var order []string
	for _, r := range p.Records {
		k := subject(r)
		thenBy[k] = describe(r)
		order = append(order, k)
	}
	nowBy := map[string]string{}
	for _, r := range now.Records {
		k := subject(r)
		nowBy[k] = describe(r)
		if _, ok := thenBy[k]; !ok {
			order = append(order, k)
		}
	}
	for _, k := range order {
		if thenBy[k] != nowBy[k] {
			out.Differences = append(out.Differences, Difference{Subject: k, Then: thenBy[k], Now: nowBy[k]})
		}
	}
	// The counts of what the budget did not try are part of the packet too.
	if then, now := cutoffText(p.Cutoff, p.GapsMore), cutoffText(res.Cutoff, res.GapsMore); then != now {
		out.Differences = append(out.Differences, Difference{Subject: "budget.cutoff", Then: then, Now: now})
	}
	reds, err := s.redactionsIn(ctx, p.Records)
	if err != nil {
		return nil, err
	}
	for _, r := range reds {
		out.Identical = false
		out.Differences = append(out.Differences, Difference{Subject: "item:" + r.Project + "/" + r.Key,
			Then: fmt.Sprintf("v%d", r.Version), Now: redactedText(r)})
	}
	if len(reds) > 0 {
		if out.Redacted, err = s.redactionsProven(ctx, p, reds); err != nil {
			return nil, err
		}
	}
	if !out.Identical && len(out.Differences) == 0 {
		i := 0
		for i < len(p.Rendered) && i < len(res.Rendered) && p.Rendered[i] == res.Rendered[i] {
			i++
		}
		out.Differences = append(out.Differences, Difference{Subject: "rendered", Then: fmt.Sprintf("differs from byte %d", i), Now: fmt.Sprintf("differs from byte %d", i)})
	}
	return out, nil
}

func cutoffText(c *assemble.Cutoff, more int) string {
	if c == nil {
		return fmt.Sprintf("none, %d gaps more", more)
	}
	return fmt.Sprintf("rank %d, headroom %d, count %d, %d gaps more", c.Rank, c.Headroom, c.Count, more)
}

func sha(s string) string {
	return hex.EncodeToString(sha256sum([]byte(s)))
}

// WhyHandoff explains a handoff's place in a packet: a predecessor the
// request named (with its record and span), or none.
func (s *Service) WhyHandoff(ctx context.Context, agent *auth.Agent, proj, id, handoffID string) (*WhyAnswer, *handoff.Handoff, error) {
	p, err := s.Get(ctx, agent, proj, id)
	if err != nil {
		return nil, nil, err
	}
	d, err := s.handoffs.Get(ctx, agent, proj, handoffID)
	if err != nil {
		return nil, nil, err
	}
	for i := range p.Records {
		r := &p.Records[i]
		if r.SubjectKind == assemble.SubjectHandoff && r.SubjectKey == handoffID {
			// The handoff as the packet saw it: its manifest never changes,
			// its status may have since.
			then := *d.Handoff
			for _, pred := range p.Predecessors {
				if pred.ID == handoffID && pred.Status != then.Status {
					then.Status = pred.Status
					if pred.Status == handoff.Pending {
						then.StatusReason, then.SupersededBy, then.UpdatedAt = "", "", then.CreatedAt
					}
				}
			}
			return &WhyAnswer{Decision: r.Decision, Record: r, Detail: "the request named it as a predecessor; predecessors are never dropped for budget"}, &then, nil
		}
	}
	return &WhyAnswer{Decision: "not_candidate", Reason: "not_a_predecessor",
		Detail: "the request did not name this handoff among its predecessors"}, d.Handoff, nil
}

// WhyContextPacket answers for the request's i-th context packet: its
// record (a part of the request, ranked and budgeted like an item) and the
// packet as the request sent it. An index the request did not have is 422
// on the parameter.
func (s *Service) WhyContextPacket(ctx context.Context, agent *auth.Agent, proj, id string, i int) (*WhyAnswer, error) {
	p, err := s.Get(ctx, agent, proj, id)
	if err != nil {
		return nil, err
	}
	if i < 0 || i >= len(p.Request.ContextPackets) {
		return nil, validation.One("context_packet", "range", "the packet's request had %d context packets; context_packet %d is not one of them", len(p.Request.ContextPackets), i)
	}
	key := assemble.ContextPacketKey(i)
	for j := range p.Records {
		r := &p.Records[j]
		if r.SubjectKind == assemble.SubjectRequest && r.SubjectKey == key {
			return &WhyAnswer{Decision: r.Decision, Record: r, Reason: r.Reason, Detail: r.Detail, ContextPacket: p.Request.ContextPackets[i]}, nil
		}
	}
	// Past pipeline 2's cutoff a candidate has no record: it was ranked
	// after the last one the budget tried.
	return &WhyAnswer{Decision: assemble.Excluded, Reason: assemble.ReasonBudgetCutoff, Cutoff: p.Cutoff,
		Detail: "ranked after the last candidate the budget tried", ContextPacket: p.Request.ContextPackets[i]}, nil
}

// retiredBy says, for a tombstone an import wrote (item.Service.ImportTx),
// that an import retired the item and with which KXM status; "" otherwise.
func retiredBy(meta json.RawMessage) string {
	var m struct {
		RetiredBy string `json:"retired_by"`
		KXM       struct {
			Status string `json:"status"`
		} `json:"kxm"`
	}
	if json.Unmarshal(meta, &m) != nil || m.RetiredBy != "import" {
		return ""
	}
	if m.KXM.Status != "" {
		return fmt.Sprintf(": an import retired it (KXM status %s)", m.KXM.Status)
	}
	return ": an import retired it"
}
