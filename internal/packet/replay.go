package packet

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/contextd/contextd/internal/assemble"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/store"
)

// replayed assembles a stored packet's request again, on its snapshot, with
// the pipeline that made it, reading the snapshot through db (pipeline 1's
// candidates, of packets made before pipeline 2, from the primary). A
// counterfactual's request carries its ablation, which the pipeline
// applies again, at the time it was assembled at.
func (s *Service) replayed(ctx context.Context, db store.DB, proj string, p *Packet) (*assemble.Result, error) {
	in := assemble.Input{Project: proj, PacketID: p.ID, Request: p.Request, Now: p.assembledAt(), Predecessors: p.Predecessors, Render: p.RenderVersion}
	if p.Pipeline < assemble.Pipeline2 {
		cands, err := s.snapshotCandidates(ctx, proj, p)
		if err != nil {
			return nil, fmt.Errorf("load snapshot: %w", err)
		}
		in.Candidates = cands
		return assemble.Assemble(in)
	}
	src, err := s.snapshotSource(ctx, db, proj, p)
	if err != nil {
		return nil, fmt.Errorf("load snapshot: %w", err)
	}
	res, _, err := assemble.AssembleBounded(ctx, in, src, assemble.Options{Stages: s.stages})
	return res, err
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
func (s *Service) redactionsIn(ctx context.Context, records []ctxtype.Record) ([]store.Redaction, error) {
	type kv struct {
		keys     []string
		versions []int32
	}
	by := map[string]*kv{}
	var projects []string
	for _, r := range records {
		if r.SubjectKind != ctxtype.SubjectItem || r.Decision != "included" {
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
// stored. The packet and its snapshot's versions are history, read in one
// read through the store's reader (the replica's, when one serves).
func (s *Service) Replay(ctx context.Context, agent *auth.Agent, proj, id string) (*ReplayResult, error) {
	var res *assemble.Result
	p, err := s.read(ctx, agent, proj, id, func(db store.DB, p *Packet) error {
		var err error
		res, err = s.replayed(ctx, db, proj, p)
		return err
	})
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
	describe := func(r ctxtype.Record) string {
		s := r.Decision
		if r.Reason != "" {
			s += ":" + r.Reason
		}
		if r.SubjectKind == ctxtype.SubjectItem {
			s += fmt.Sprintf(" v%d", r.SubjectVersion)
		}
		if r.Span != nil {
			s += fmt.Sprintf(" [%d,%d)", r.Span.Start, r.Span.End)
		}
		return s
	}
	subject := func(r ctxtype.Record) string {
		if r.SubjectKind == ctxtype.SubjectItem {
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
