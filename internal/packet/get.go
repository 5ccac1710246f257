package packet

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/page"
	"github.com/contextd/contextd/internal/store"
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
	req, err := ctxtype.DecodeRequest(r.Request)
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
	p.Pipeline, p.GapsMore, p.RenderVersion, p.AblationOf = r.Pipeline, r.GapsMore, r.RenderVersion, r.AblationOf
	if len(r.BudgetCutoff) > 0 {
		if err := json.Unmarshal(r.BudgetCutoff, &p.Cutoff); err != nil {
			return nil, fmt.Errorf("decode budget cutoff: %w", err)
		}
	}
	return p, nil
}

// Get returns a packet with the records the agent may see, and the
// counterfactuals made of it (the oldest MaxAblationsListed): they are
// packets for the same role, seen by whoever sees this one.
func (s *Service) Get(ctx context.Context, agent *auth.Agent, proj, id string) (*Packet, error) {
	return s.read(ctx, agent, proj, id, func(db store.DB, p *Packet) (err error) {
		p.Ablations, err = db.PacketAblationIDs(ctx, proj, id, MaxAblationsListed)
		return err
	})
}

// read is Get, running also (nil: nothing) in the same read as the packet:
// the further reads of history an answer about the packet needs. A packet
// and its records never change once written, so they are read through
// the store's reader (store.Read: the replica when one serves and has
// replayed what the primary had committed when the read began, else the
// primary, and the primary again when the replica has not the packet), and also reads through the same
// db, so that what it finds agrees with the packet found. What the
// agent may see of it now (items hidden since, grants) is read from the
// primary after.
func (s *Service) read(ctx context.Context, agent *auth.Agent, proj, id string, also func(db store.DB, p *Packet) error) (*Packet, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return nil, err
	}
	var p *Packet
	err := s.store.Read(ctx, func(db store.DB) error {
		var err error
		if p, err = s.getIn(ctx, db, agent, proj, id); err != nil || also == nil {
			return err
		}
		return also(db, p)
	})
	if err != nil {
		return nil, err
	}
	return p, s.shownNow(ctx, agent, p)
}

// getIn reads a packet and the records its viewer may see through db; not
// found when it is not there or the agent may not open it.
func (s *Service) getIn(ctx context.Context, db store.DB, agent *auth.Agent, proj, id string) (*Packet, error) {
	row, err := db.PacketGet(ctx, proj, id)
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
	recs, err := db.PacketRecordList(ctx, proj, id)
	if err != nil {
		return nil, err
	}
	p.Records = visibleRecords(agent, append(p.Records, recs...))
	return p, nil
}

// shownNow leaves out of p, for a non-admin, the records of items hidden
// from its role now, and their share of the gaps and counts.
func (s *Service) shownNow(ctx context.Context, agent *auth.Agent, p *Packet) error {
	shown, err := s.withoutHiddenNow(ctx, agent, p.Records)
	if err != nil || len(shown) == len(p.Records) {
		return err
	}
	return s.withoutRecordsOf(ctx, p, shown)
}

// withoutRecordsOf makes p's answer hold only the records shown: the
// unresolved gaps of the others, their share of the gaps not listed and of
// the provenance counts go too, computed as the packet is read.
func (s *Service) withoutRecordsOf(ctx context.Context, p *Packet, shown []ctxtype.Record) error {
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
		// A budget gap goes with its record; the others (the inviolable
		// gap, an unresolved pin, which no record stands for) stay.
		if g.Reason != ctxtype.ReasonBudget || kept[id{g.Key, g.Version}] {
			gaps = append(gaps, g)
		}
	}
	// Stored records do not carry kind and source; their versions do, read
	// in one query per layer.
	keys, versions := map[string][]string{}, map[string][]int32{}
	for _, r := range p.Records {
		if r.SubjectKind != ctxtype.SubjectItem || kept[id{r.SubjectKey, r.SubjectVersion}] {
			continue
		}
		if r.Reason == ctxtype.ReasonBudget && !listed[id{r.SubjectKey, r.SubjectVersion}] {
			p.GapsMore--
		}
		if r.Decision == ctxtype.Included {
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
func (s *Service) withoutHiddenNow(ctx context.Context, agent *auth.Agent, records []ctxtype.Record) ([]ctxtype.Record, error) {
	hidden, err := s.hiddenNow(ctx, agent, records)
	if err != nil || len(hidden) == 0 {
		return records, err
	}
	return withoutHidden(records, hidden), nil
}

// hiddenNow is the (layer, key) of the items among records that are hidden
// from a non-admin's role now, read in one query per layer.
func (s *Service) hiddenNow(ctx context.Context, agent *auth.Agent, records []ctxtype.Record) (map[[2]string]bool, error) {
	if agent.SeesAllRoles() {
		return nil, nil
	}
	keys := map[string][]string{}
	for _, r := range records {
		if r.SubjectKind == ctxtype.SubjectItem && !slices.Contains(keys[r.SubjectProject], r.SubjectKey) {
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

func withoutHidden(records []ctxtype.Record, hidden map[[2]string]bool) []ctxtype.Record {
	out := records[:0:0]
	for _, r := range records {
		if r.SubjectKind != ctxtype.SubjectItem || !hidden[[2]string{r.SubjectProject, r.SubjectKey}] {
			out = append(out, r)
		}
	}
	return out
}

// summaryRecords reads, for a non-admin, the records its role may see of a
// page of packet summaries, in one query through db (the listing's), for
// summariesNow.
func summaryRecords(ctx context.Context, db store.DB, agent *auth.Agent, proj string, ps []*Packet) error {
	if agent.SeesAllRoles() || len(ps) == 0 {
		return nil
	}
	ids := make([]string, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	recs, err := db.PacketRecordListMany(ctx, proj, ids)
	if err != nil {
		return err
	}
	for _, p := range ps {
		p.Records = visibleRecords(agent, recs[p.ID])
	}
	return nil
}

// summariesNow makes a non-admin's page of packet summaries (their records
// read by summaryRecords) leave out what is hidden from its role now
// (gaps, counts), as Get does for one packet: their items' visibility is
// read in one query per layer for the whole page.
func (s *Service) summariesNow(ctx context.Context, agent *auth.Agent, ps []*Packet) error {
	if agent.SeesAllRoles() || len(ps) == 0 {
		return nil
	}
	var all []ctxtype.Record
	for _, p := range ps {
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
	// Packets are history: the page and its records come through the
	// store's reader (a replica answers only once it holds every packet
	// the primary had committed when the read began).
	var out []*Packet
	next := ""
	err = s.store.Read(ctx, func(db store.DB) error {
		var err error
		if out, next, err = listIn(ctx, db, proj, params, lp.Limit); err != nil {
			return err
		}
		return summaryRecords(ctx, db, agent, proj, out)
	})
	if err != nil {
		return nil, "", err
	}
	if err := s.summariesNow(ctx, agent, out); err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// listIn reads a page of packets through db, and the cursor of the next.
func listIn(ctx context.Context, db store.DB, proj string, params store.PacketListParams, limit int) ([]*Packet, string, error) {
	rows, err := db.PacketList(ctx, params)
	if err != nil {
		return nil, "", err
	}
	var out []*Packet
	for i, r := range rows {
		if i == limit {
			last := rows[i-1]
			return out, page.Encode(packetsListing(proj), page.At{T: last.CreatedAt, ID: last.ID}), nil
		}
		p, err := fromRow(r)
		if err != nil {
			return nil, "", err
		}
		out = append(out, p)
	}
	return out, "", nil
}
