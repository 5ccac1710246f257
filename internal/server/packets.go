package server

import (
	"context"
	"encoding/json"
	"time"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/assemble"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/footprint"
	"github.com/contextd/contextd/internal/handoff"
	"github.com/contextd/contextd/internal/packet"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/validation"
)

func toSpan(s *ctxtype.Span) *api.Span {
	if s == nil {
		return nil
	}
	return &api.Span{Start: s.Start, End: s.End}
}

func toRecord(r ctxtype.Record) api.Record {
	out := api.Record{Subject: r.SubjectKind, Key: r.SubjectKey, Decision: r.Decision, Span: toSpan(r.Span),
		Section: ptrIf(r.Section), Rule: ptrIf(r.Rule), Reason: ptrIf(r.Reason), Detail: ptrIf(r.Detail), Layer: ptrIf(r.Layer)}
	tokens, rank, pos := r.Tokens, r.Rank, r.Position
	out.Tokens, out.Rank, out.Position = &tokens, &rank, &pos
	if r.SubjectKind == ctxtype.SubjectItem {
		v := r.SubjectVersion
		out.Version, out.Project = &v, &r.SubjectProject
	}
	return out
}

func toBudget(p *packet.Packet) api.Budget {
	gaps := make([]api.Gap, len(p.Gaps))
	for i, g := range p.Gaps {
		gaps[i] = api.Gap{Reason: g.Reason, Key: ptrIf(g.Key), Version: ptrIf(g.Version), Tokens: ptrIf(g.Tokens)}
	}
	return api.Budget{Allocated: p.Allocated, Used: p.Used, Headroom: p.Allocated - p.Used, UnresolvedGaps: gaps,
		UnresolvedGapsMore: p.GapsMore, Cutoff: toCutoff(p.Cutoff)}
}

func toCutoff(c *assemble.Cutoff) *api.Cutoff {
	if c == nil {
		return nil
	}
	return &api.Cutoff{Rank: c.Rank, Headroom: c.Headroom, Count: c.Count}
}

func toPacket(p *packet.Packet) api.Packet {
	out := api.Packet{
		PacketId: p.ID, Project: p.Project, CreatedAt: p.CreatedAt, CreatedBy: p.CreatedBy, TargetRole: p.TargetRole,
		TaskId: ptrIf(p.TaskID), Format: p.Format, Tokenizer: p.Tokenizer, Rendered: p.Rendered, RenderedSha256: p.RenderedSHA256,
		Budget: toBudget(p), ProvenanceSummary: api.ProvenanceSummary{ByKind: p.Provenance.ByKind, BySource: p.Provenance.BySource},
		Sections: []api.Section{}, Excluded: p.Excluded(), AblationOf: ptrIf(p.AblationOf),
	}
	if p.Request != nil {
		out.RolePolicy = toPacketRolePolicy(p.Request.RolePolicy)
	}
	if len(p.Ablations) > 0 {
		out.Ablations = &p.Ablations
	}
	for _, sec := range p.Sections() {
		s := api.Section{Name: sec.Name, Entries: make([]api.SectionEntry, len(sec.Entries))}
		for i, r := range sec.Entries {
			e := api.SectionEntry{Subject: r.SubjectKind, Key: r.SubjectKey, Tokens: r.Tokens, Span: *toSpan(r.Span),
				Rule: r.Rule, Decision: r.Decision, Reason: ptrIf(r.Reason)}
			if r.SubjectKind == ctxtype.SubjectItem {
				v := r.SubjectVersion
				e.Version = &v
				// The packet's own layer goes without saying: an entry names
				// its project only when it is another's (_shared). 42
				// entries of a default packet repeated it, ~700 of the
				// answer's bytes (issue 34's answer-size target).
				if r.SubjectProject != p.Project {
					pr := r.SubjectProject
					e.Project = &pr
				}
			}
			s.Entries[i] = e
		}
		out.Sections = append(out.Sections, s)
	}
	return out
}

// AssemblePacket implements api.StrictServerInterface.
func (s *Server) AssemblePacket(ctx context.Context, r api.AssemblePacketRequestObject) (api.AssemblePacketResponseObject, error) {
	body, err := requireBody(r.Body)
	if err != nil {
		return nil, err
	}
	req, err := fromPacketRequestAPI(body)
	if err != nil {
		return nil, err
	}
	// The snapshot is read (and the packet assembled) before the write
	// transaction begins, so a request never holds two connections.
	p, err := s.packets.Prepare(ctx, agentFrom(ctx), r.Project, req)
	if err != nil {
		return nil, err
	}
	if err := s.write(ctx, func(tx *store.Tx) error { return s.packets.StoreTx(ctx, tx, p) }); err != nil {
		return nil, err
	}
	return api.AssemblePacket201JSONResponse(toPacket(s.packets.ForViewer(agentFrom(ctx), p))), nil
}

func parseTime(name string, v *string) (*time.Time, error) {
	if v == nil {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, *v)
	if err != nil {
		return nil, validation.One(name, "format", "%s must be an RFC 3339 time, not %q", name, *v)
	}
	return &t, nil
}

// ListPackets implements api.StrictServerInterface.
func (s *Server) ListPackets(ctx context.Context, r api.ListPacketsRequestObject) (api.ListPacketsResponseObject, error) {
	limit, err := pageLimit(r.Params.Limit)
	if err != nil {
		return nil, err
	}
	since, err := parseTime("since", r.Params.Since)
	if err != nil {
		return nil, err
	}
	ps, next, err := s.packets.List(ctx, agentFrom(ctx), r.Project, packet.ListParams{
		TaskID: deref(r.Params.TaskId), TargetRole: deref(r.Params.TargetRole), Agent: deref(r.Params.Agent),
		Since: since, Cursor: deref(r.Params.Cursor), Limit: limit,
	})
	if err != nil {
		return nil, err
	}
	out := api.ListPackets200JSONResponse{Data: []api.PacketSummary{}, NextCursor: ptrIf(next)}
	for _, p := range ps {
		out.Data = append(out.Data, api.PacketSummary{
			PacketId: p.ID, Project: p.Project, CreatedAt: p.CreatedAt, CreatedBy: p.CreatedBy, TargetRole: p.TargetRole,
			TaskId: ptrIf(p.TaskID), Format: p.Format, Tokenizer: p.Tokenizer, RenderedSha256: p.RenderedSHA256,
			Budget: toBudget(p), ProvenanceSummary: api.ProvenanceSummary{ByKind: p.Provenance.ByKind, BySource: p.Provenance.BySource},
		})
	}
	return out, nil
}

// GetPacket implements api.StrictServerInterface.
func (s *Server) GetPacket(ctx context.Context, r api.GetPacketRequestObject) (api.GetPacketResponseObject, error) {
	p, err := s.packets.Get(ctx, agentFrom(ctx), r.Project, r.Id)
	if err != nil {
		return nil, err
	}
	os, err := s.outcomes.Latest(ctx, p)
	if err != nil {
		return nil, err
	}
	out := toPacket(p)
	out.Outcomes = packetOutcomes(os)
	return api.GetPacket200JSONResponse(out), nil
}

// ListPacketRecords implements api.StrictServerInterface: the records the
// viewer may see, as a RecordList or, with format=agentfootprint, as an
// agentfootprint trace (package footprint maps them).
func (s *Server) ListPacketRecords(ctx context.Context, r api.ListPacketRecordsRequestObject) (api.ListPacketRecordsResponseObject, error) {
	d := deref(r.Params.Decision)
	if d != "" && d != ctxtype.Included && d != ctxtype.Excluded {
		return nil, validation.One("decision", "enum", "decision must be included or excluded")
	}
	format := api.RecordsFormatContextd
	if r.Params.Format != nil {
		format = *r.Params.Format
	}
	if !format.Valid() {
		return nil, validation.One("format", "enum", "format must be contextd or agentfootprint, not %q", format)
	}
	p, err := s.packets.Get(ctx, agentFrom(ctx), r.Project, r.Id)
	if err != nil {
		return nil, err
	}
	recs := []ctxtype.Record{}
	for _, rec := range p.Records {
		if d == "" || rec.Decision == d {
			recs = append(recs, rec)
		}
	}
	var body any
	if format == api.RecordsFormatAgentfootprint {
		body = footprint.FromRecords(p.Rendered, p.Allocated, recs)
	} else {
		out := api.RecordList{Data: make([]api.Record, len(recs))}
		for i, rec := range recs {
			out.Data[i] = toRecord(rec)
		}
		body = out
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	return api.ListPacketRecords200JSONResponse(b), nil
}

// WhyPacket implements api.StrictServerInterface.
func (s *Server) WhyPacket(ctx context.Context, r api.WhyPacketRequestObject) (api.WhyPacketResponseObject, error) {
	var (
		a   *packet.WhyAnswer
		h   *handoff.Handoff
		err error
	)
	item, hnd, cp := deref(r.Params.Item), deref(r.Params.Handoff), r.Params.ContextPacket
	given := 0
	for _, g := range []bool{item != "", hnd != "", cp != nil} {
		if g {
			given++
		}
	}
	switch {
	case given != 1:
		return nil, validation.One("item", "required", "give exactly one of item (an item key), handoff (a handoff id) or context_packet (an index)")
	case item != "":
		a, err = s.packets.Why(ctx, agentFrom(ctx), r.Project, r.Id, item, deref(r.Params.Layer))
	case hnd != "":
		a, h, err = s.packets.WhyHandoff(ctx, agentFrom(ctx), r.Project, r.Id, hnd)
	default:
		a, err = s.packets.WhyContextPacket(ctx, agentFrom(ctx), r.Project, r.Id, *cp)
	}
	if err != nil {
		return nil, err
	}
	out := api.WhyPacket200JSONResponse{Decision: a.Decision, Reason: ptrIf(a.Reason), Detail: ptrIf(a.Detail), Cutoff: toCutoff(a.Cutoff)}
	if h != nil {
		ah := toHandoffAPI(h)
		out.Handoff = &ah
	}
	if rec := a.Record; rec != nil {
		out.Rule, out.Layer, out.Section, out.Span = ptrIf(rec.Rule), ptrIf(rec.Layer), ptrIf(rec.Section), toSpan(rec.Span)
		tokens, rank := rec.Tokens, rec.Rank
		out.Tokens, out.Rank = &tokens, &rank
	}
	if a.Item != nil {
		it := toItem(a.Item)
		out.Item = &it
	}
	if a.ContextPacket != nil {
		out.ContextPacket = &a.ContextPacket
	}
	if a.Redaction != nil {
		red := toRedaction(*a.Redaction)
		out.Redaction = &red
	}
	out.PendingProposals = toPending(a.Pending)
	if d := a.Policy; d != nil {
		out.RolePolicy = &struct {
			Layer  string `json:"layer"`
			Member string `json:"member"`
			Role   string `json:"role"`
		}{Layer: d.Layer, Member: d.Member, Role: d.Role}
	}
	return out, nil
}

// AttributePacket implements api.StrictServerInterface.
func (s *Server) AttributePacket(ctx context.Context, r api.AttributePacketRequestObject) (api.AttributePacketResponseObject, error) {
	body, err := requireBody(r.Body)
	if err != nil {
		return nil, err
	}
	ms, err := s.packets.Attribute(ctx, agentFrom(ctx), r.Project, r.Id, packet.AttributeParams{Text: body.Text, Start: body.Start, End: body.End})
	if err != nil {
		return nil, err
	}
	p, err := s.packets.Get(ctx, agentFrom(ctx), r.Project, r.Id)
	if err != nil {
		return nil, err
	}
	out := api.AttributePacket200JSONResponse{Matches: []api.AttributeMatch{}}
	for _, m := range ms {
		am := api.AttributeMatch{Start: m.Start, End: m.End, Text: p.Rendered[m.Start:m.End], Match: m.Kind, Similarity: m.Similarity,
			Records: []api.AttributeRecord{}, Scaffolding: []api.Span{}}
		recs, err := attributeRecords(m)
		if err != nil {
			return nil, err
		}
		am.Records = recs
		for _, sp := range m.Scaffolding {
			am.Scaffolding = append(am.Scaffolding, api.Span{Start: sp.Start, End: sp.End})
		}
		out.Matches = append(out.Matches, am)
	}
	return out, nil
}

// ReplayPacket implements api.StrictServerInterface.
func (s *Server) ReplayPacket(ctx context.Context, r api.ReplayPacketRequestObject) (api.ReplayPacketResponseObject, error) {
	res, err := s.packets.Replay(ctx, agentFrom(ctx), r.Project, r.Id)
	if err != nil {
		return nil, err
	}
	out := api.ReplayPacket200JSONResponse{Identical: res.Identical, RenderedSha256Then: res.SHA256Then, RenderedSha256Now: res.SHA256Now,
		Differences: make([]api.ReplayDifference, len(res.Differences))}
	if res.Redacted {
		out.Redacted = &res.Redacted
	}
	for i, d := range res.Differences {
		out.Differences[i] = api.ReplayDifference{Subject: d.Subject, Then: d.Then, Now: d.Now}
	}
	return out, nil
}

// ListItemInjections implements api.StrictServerInterface.
func (s *Server) ListItemInjections(ctx context.Context, r api.ListItemInjectionsRequestObject) (api.ListItemInjectionsResponseObject, error) {
	limit, err := pageLimit(r.Params.Limit)
	if err != nil {
		return nil, err
	}
	since, err := parseTime("since", r.Params.Since)
	if err != nil {
		return nil, err
	}
	until, err := parseTime("until", r.Params.Until)
	if err != nil {
		return nil, err
	}
	if p := r.Params.Project; p != nil {
		if err := project.CheckName("project", *p); err != nil {
			return nil, err
		}
	}
	var version *int
	if r.Params.Version != nil {
		// Versions are numbered from 1: a smaller one names no version.
		if *r.Params.Version < 1 {
			return nil, validation.One("version", "range", "version must be 1 or more, not %d", *r.Params.Version)
		}
		v := int(*r.Params.Version)
		version = &v
	}
	inj, next, of, err := s.packets.Injections(ctx, agentFrom(ctx), r.Project, r.Key, packet.InjectionParams{
		Project: deref(r.Params.Project), Version: version, Since: since, Until: until, Cursor: deref(r.Params.Cursor), Limit: limit,
	})
	if err != nil {
		return nil, err
	}
	out := api.ListItemInjections200JSONResponse{Project: of, Data: []api.Injection{}, NextCursor: ptrIf(next)}
	for _, i := range inj {
		out.Data = append(out.Data, api.Injection{PacketId: i.PacketID, Project: i.Project, CreatedAt: i.CreatedAt,
			TargetRole: i.TargetRole, Agent: i.Agent, Section: i.Section, Rule: i.Rule, Version: i.Version})
	}
	return out, nil
}

// attributeRecords are a match's records and withheld spans, as the
// contract writes them.
func attributeRecords(m packet.Match) ([]api.AttributeRecord, error) {
	out := []api.AttributeRecord{}
	for _, rec := range m.Records {
		b, err := json.Marshal(toRecord(rec))
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	for _, sp := range m.Withheld {
		b, err := json.Marshal(api.WithheldRecord{Withheld: true, Span: api.Span{Start: sp.Start, End: sp.End}})
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// AttributeTask implements api.StrictServerInterface.
func (s *Server) AttributeTask(ctx context.Context, r api.AttributeTaskRequestObject) (api.AttributeTaskResponseObject, error) {
	body, err := requireBody(r.Body)
	if err != nil {
		return nil, err
	}
	ms, err := s.packets.AttributeTask(ctx, agentFrom(ctx), r.Project, r.TaskId, body.Text)
	if err != nil {
		return nil, err
	}
	out := api.AttributeTask200JSONResponse{TaskId: r.TaskId, Matches: []api.TaskAttributeMatch{}}
	for _, m := range ms {
		recs, err := attributeRecords(m.Match)
		if err != nil {
			return nil, err
		}
		out.Matches = append(out.Matches, api.TaskAttributeMatch{PacketId: m.PacketID, CreatedAt: m.CreatedAt.UTC(), Similarity: m.Similarity,
			Match: m.Kind, Start: m.Start, End: m.End, Text: m.Text, Records: recs})
	}
	return out, nil
}
