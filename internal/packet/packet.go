// Package packet assembles packets against the database and answers
// questions about them: it loads candidates (one indexed query per layer,
// inside one repeatable-read snapshot it remembers), runs the pure pipeline
// of package assemble, and stores the packet with a record of every
// decision in one transaction. Later it explains: why an item is or is not
// in a packet, which records a piece of text came from, which packets used
// an item, and whether a replay still gives the same bytes.
package packet

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/contextd/contextd/internal/assemble"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/handoff"
	"github.com/contextd/contextd/internal/ident"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/keyword"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/render"
	"github.com/contextd/contextd/internal/store"
	"github.com/contextd/contextd/internal/store/dbsqlc"
)

// ErrNotFound means no such packet, or one the caller may not see.
var ErrNotFound = errors.New("packet not found")

// Packet is a stored packet with its records.
type Packet struct {
	ID             string
	Project        string
	CreatedAt      time.Time
	CreatedBy      string
	TargetRole     string
	TaskID         string
	Request        *assemble.Request
	RequestRaw     json.RawMessage
	Rendered       string
	RenderedSHA256 string
	Tokenizer      string
	Format         string
	Allocated      int
	Used           int
	Gaps           []assemble.Gap
	Provenance     Provenance
	Snapshot       string
	Predecessors   []assemble.Predecessor
	// Records are those the viewer may see (admin-only ones only for admins).
	Records []assemble.Record
}

// Provenance counts the included item entries by kind and by source.
type Provenance struct {
	ByKind   map[string]int `json:"by_kind"`
	BySource map[string]int `json:"by_source"`
}

// Excluded counts the excluded records by reason.
func (p *Packet) Excluded() map[string]int {
	out := map[string]int{}
	for _, r := range p.Records {
		if r.Decision == assemble.Excluded {
			out[r.Reason]++
		}
	}
	return out
}

// Section is one heading of a packet and the entries under it, in order.
type Section struct {
	Name    string
	Entries []assemble.Record
}

// Sections groups the records that have a place in the text by section,
// in the order they appear.
func (p *Packet) Sections() []Section {
	var with []assemble.Record
	for _, r := range p.Records {
		if r.Span != nil {
			with = append(with, r)
		}
	}
	sort.SliceStable(with, func(i, j int) bool { return with[i].Span.Start < with[j].Span.Start })
	var out []Section
	idx := map[string]int{}
	for _, r := range with {
		name := r.Section
		if r.Reason == assemble.ReasonContradicted {
			name = "Active Contradictions"
		}
		i, ok := idx[name]
		if !ok {
			i = len(out)
			idx[name] = i
			out = append(out, Section{Name: name})
		}
		out[i].Entries = append(out[i].Entries, r)
	}
	return out
}

// Service assembles and explains packets.
type Service struct {
	pool     *pgxpool.Pool
	projects *project.Service
	handoffs *handoff.Service
}

// NewService returns a packet service.
func NewService(pool *pgxpool.Pool, projects *project.Service, handoffs *handoff.Service) *Service {
	return &Service{pool: pool, projects: projects, handoffs: handoffs}
}

// predecessorsOf resolves the request's predecessor handoffs as they are now.
func (s *Service) predecessorsOf(ctx context.Context, proj string, ids []string) ([]assemble.Predecessor, error) {
	hs, err := s.handoffs.Resolve(ctx, proj, ids)
	if err != nil {
		return nil, err
	}
	out := make([]assemble.Predecessor, len(hs))
	for i, h := range hs {
		p := assemble.Predecessor{
			ID: h.ID, SourceRole: h.Source.Role, TargetRole: h.Target.Role, Status: h.Status, StepID: h.Source.StepID,
			AttemptID: h.Source.AttemptID, Summary: h.Summary, Decisions: h.Decisions,
			Artifacts: []render.Artifact{}, Verdicts: []render.Verdict{},
			WitnessExitCode: h.VerificationEvidence.WitnessExitCode, WitnessPassed: h.VerificationEvidence.WitnessPassed,
		}
		for _, a := range h.Deliverables.Artifacts {
			p.Artifacts = append(p.Artifacts, render.Artifact{Name: a.Name, Kind: a.Kind, Ref: a.ArtifactRef, Snippet: a.ContentSnippet})
		}
		for _, v := range h.VerificationEvidence.CriticVerdicts {
			p.Verdicts = append(p.Verdicts, render.Verdict{Critic: v.Critic, Verdict: v.Verdict, Summary: v.Summary})
		}
		out[i] = p
	}
	return out, nil
}

// Assemble builds, stores and returns a packet for req (already decoded;
// Normalize is called here).
func (s *Service) Assemble(ctx context.Context, agent *auth.Agent, proj string, req *assemble.Request) (*Packet, error) {
	if err := s.projects.Authorize(ctx, agent, proj, auth.ReadOnly); err != nil {
		return nil, err
	}
	if err := req.Normalize(); err != nil {
		return nil, err
	}
	if proj == assemble.SharedProject && !agent.IsAdmin() {
		// A packet is written to the project it is assembled in, and
		// _shared is writable by admins only; agents assemble in their
		// projects, where _shared's items come in anyway.
		return nil, fmt.Errorf("%w: packets are assembled in a project; _shared is writable by admins only", auth.ErrForbidden)
	}
	if !agent.IsAdmin() && req.TargetRole != agent.Role {
		return nil, fmt.Errorf("%w: an agent assembles only for its own role (%s), not %s", auth.ErrForbidden, agent.Role, req.TargetRole)
	}
	preds, err := s.predecessorsOf(ctx, proj, req.Predecessors)
	if err != nil {
		return nil, err
	}

	now, snapshot, cands, err := s.loadCandidates(ctx, proj, req)
	if err != nil {
		return nil, fmt.Errorf("load candidates: %w", err)
	}
	res, err := assemble.Assemble(assemble.Input{Project: proj, Request: req, Candidates: cands, Now: now, Predecessors: preds})
	if err != nil {
		return nil, fmt.Errorf("assemble: %w", err)
	}
	raw, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	sum := sha256.Sum256([]byte(res.Rendered))
	p := &Packet{
		ID: ident.New("ctxpkt"), Project: proj, CreatedAt: now, CreatedBy: agent.ID, TargetRole: req.TargetRole,
		Request: req, RequestRaw: raw, Rendered: res.Rendered, RenderedSHA256: hex.EncodeToString(sum[:]),
		Tokenizer: string(req.Tokenizer), Format: string(req.Format), Allocated: res.Allocated, Used: res.Used,
		Gaps: res.Gaps, Provenance: provenanceOf(res.Records), Snapshot: snapshot, Records: res.Records,
		Predecessors: preds,
	}
	if p.Predecessors == nil {
		p.Predecessors = []assemble.Predecessor{}
	}
	if p.Gaps == nil {
		p.Gaps = []assemble.Gap{}
	}
	if req.Task != nil {
		p.TaskID = req.Task.TaskID
	}
	if err := s.store(ctx, p, sum[:]); err != nil {
		return nil, fmt.Errorf("store packet: %w", err)
	}
	p.Records = visibleRecords(agent, p.Records)
	return p, nil
}

func provenanceOf(records []assemble.Record) Provenance {
	pv := Provenance{ByKind: map[string]int{}, BySource: map[string]int{}}
	for _, r := range records {
		switch {
		case r.SubjectKind == assemble.SubjectItem && r.Decision == assemble.Included:
			pv.ByKind[r.Kind]++
			pv.BySource[r.Source]++
		case r.SubjectKind == assemble.SubjectHandoff:
			// Predecessor outputs are entries too: a handoff, from a peer.
			pv.ByKind["handoff"]++
			pv.BySource["peer"]++
		}
	}
	return pv
}

func visibleRecords(agent *auth.Agent, records []assemble.Record) []assemble.Record {
	if agent.IsAdmin() {
		return records
	}
	out := make([]assemble.Record, 0, len(records))
	for _, r := range records {
		if !r.AdminOnly {
			out = append(out, r)
		}
	}
	return out
}

// loadCandidates reads, in one repeatable-read snapshot, the plausible
// candidates of each layer: always-on items, tool items, keyword items by
// first word, pins, the top relevance matches, and the project items that
// override a _shared candidate. It returns the snapshot's time and identity.
func (s *Service) loadCandidates(ctx context.Context, proj string, req *assemble.Request) (time.Time, string, []assemble.Candidate, error) {
	// The reads share one repeatable-read snapshot, which the packet
	// remembers. Inside an idempotent request the ambient transaction is
	// that snapshot (the idempotency layer opens it at repeatable read for
	// this route): taking a second connection while holding one could starve
	// the pool.
	var tx pgx.Tx
	if amb, ok := store.AmbientTx(ctx); ok {
		tx = amb
	} else {
		own, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
		if err != nil {
			return time.Time{}, "", nil, store.Interpret(err)
		}
		defer func() { _ = own.Rollback(context.WithoutCancel(ctx)) }()
		tx = own
	}
	point, err := store.Q.PacketReadPoint(ctx, tx)
	if err != nil {
		return time.Time{}, "", nil, store.Interpret(err)
	}
	if point.Isolation != "repeatable read" {
		return time.Time{}, "", nil, fmt.Errorf("packet reads need a repeatable-read transaction, not %s", point.Isolation)
	}
	now := point.Now.UTC()

	var tools []string
	for _, tr := range req.ToolResults {
		tools = append(tools, tr.Tool)
	}
	words := personWords(req)

	seen := map[[2]string]int{}
	var out []assemble.Candidate
	add := func(rows []dbsqlc.ItemVersionRow) {
		for _, r := range rows {
			k := [2]string{r.Project, r.Key}
			if _, ok := seen[k]; ok {
				continue
			}
			seen[k] = len(out)
			out = append(out, assemble.Candidate{Version: item.FromRow(r)})
		}
	}
	for _, layer := range []string{proj, assemble.SharedProject} {
		rows, err := store.Q.CandidateAlways(ctx, tx, layer)
		if err != nil {
			return now, "", nil, store.Interpret(err)
		}
		add(rows)
		if len(tools) > 0 {
			rows, err = store.Q.CandidateTools(ctx, tx, dbsqlc.CandidateToolsParams{Project: layer, Tools: tools})
			if err != nil {
				return now, "", nil, store.Interpret(err)
			}
			add(rows)
		}
		if len(words) > 0 {
			rows, err = store.Q.CandidateKeywords(ctx, tx, dbsqlc.CandidateKeywordsParams{Project: layer, Words: words})
			if err != nil {
				return now, "", nil, store.Interpret(err)
			}
			add(rows)
		}
		if len(req.Pins) > 0 {
			rows, err = store.Q.CandidateByKeys(ctx, tx, dbsqlc.CandidateByKeysParams{Project: layer, Keys: req.Pins})
			if err != nil {
				return now, "", nil, store.Interpret(err)
			}
			add(rows)
		}
	}
	if req.Query != "" {
		rows, err := store.Q.CandidateRelevance(ctx, tx, dbsqlc.CandidateRelevanceParams{
			Query: req.Query, Projects: []string{proj, assemble.SharedProject}, At: now, Max: assemble.RelevanceLimit,
		})
		if err != nil {
			return now, "", nil, store.Interpret(err)
		}
		for _, r := range rows {
			rank := r.Rank
			k := [2]string{r.ItemVersionRow.Project, r.ItemVersionRow.Key}
			if i, ok := seen[k]; ok {
				out[i].Relevance = &rank
				continue
			}
			seen[k] = len(out)
			out = append(out, assemble.Candidate{Version: item.FromRow(r.ItemVersionRow), Relevance: &rank})
		}
	}
	// Project items that override a _shared candidate, whether or not they fire.
	var sharedKeys []string
	for _, c := range out {
		if c.Version.Project == assemble.SharedProject {
			if _, ok := seen[[2]string{proj, c.Version.Key}]; !ok {
				sharedKeys = append(sharedKeys, c.Version.Key)
			}
		}
	}
	if len(sharedKeys) > 0 {
		rows, err := store.Q.CandidateByKeys(ctx, tx, dbsqlc.CandidateByKeysParams{Project: proj, Keys: sharedKeys})
		if err != nil {
			return now, "", nil, store.Interpret(err)
		}
		add(rows)
	}
	return now, point.Snapshot, out, nil
}

// personWords is every distinct word a person said: keyword items are
// found by the first word of their keywords.
func personWords(req *assemble.Request) []string {
	set := map[string]bool{}
	for _, m := range req.History {
		if m.Author == "person" {
			for _, w := range keyword.Words(m.Content) {
				set[w] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for w := range set {
		out = append(out, w)
	}
	slices.Sort(out)
	return out
}

// snapshotCandidates is loadCandidates as of a stored snapshot: every
// current version the snapshot saw (the pipeline itself decides what fires)
// and the relevance ranks it would have computed.
func (s *Service) snapshotCandidates(ctx context.Context, proj string, p *Packet) ([]assemble.Candidate, error) {
	db := store.Exec(ctx, s.pool)
	projects := []string{proj, assemble.SharedProject}
	rows, err := store.Q.SnapshotVersions(ctx, db, dbsqlc.SnapshotVersionsParams{Projects: projects, Snapshot: p.Snapshot})
	if err != nil {
		return nil, store.Interpret(err)
	}
	ranks := map[[2]string]float64{}
	if p.Request.Query != "" {
		rel, err := store.Q.SnapshotRelevance(ctx, db, dbsqlc.SnapshotRelevanceParams{
			Projects: projects, Snapshot: p.Snapshot, Query: p.Request.Query, At: p.CreatedAt, Max: assemble.RelevanceLimit,
		})
		if err != nil {
			return nil, store.Interpret(err)
		}
		for _, r := range rel {
			ranks[[2]string{r.Project, r.Key}] = r.Rank
		}
	}
	out := make([]assemble.Candidate, 0, len(rows))
	for _, r := range rows {
		c := assemble.Candidate{Version: item.FromRow(r)}
		if rank, ok := ranks[[2]string{r.Project, r.Key}]; ok {
			c.Relevance = &rank
		}
		out = append(out, c)
	}
	return out, nil
}

func (s *Service) store(ctx context.Context, p *Packet, sum []byte) error {
	gaps, _ := json.Marshal(p.Gaps)
	prov, _ := json.Marshal(p.Provenance)
	preds, _ := json.Marshal(p.Predecessors)
	return store.WithTx(ctx, s.pool, func(tx pgx.Tx) error {
		err := store.Q.PacketInsert(ctx, tx, dbsqlc.PacketInsertParams{
			Project: p.Project, ID: p.ID, CreatedAt: p.CreatedAt, CreatedBy: p.CreatedBy, TargetRole: p.TargetRole,
			TaskID: p.TaskID, Request: p.RequestRaw, Predecessors: preds, Format: p.Format, Tokenizer: p.Tokenizer, Rendered: p.Rendered,
			RenderedSha256: sum, TokenBudget: int32(p.Allocated), TokensUsed: int32(p.Used), Gaps: gaps,
			ProvenanceSummary: prov, Snapshot: p.Snapshot,
		})
		if err != nil {
			return store.Interpret(err)
		}
		rows := make([]dbsqlc.PacketRecordInsertManyParams, len(p.Records))
		for i, r := range p.Records {
			row := dbsqlc.PacketRecordInsertManyParams{
				Project: p.Project, PacketID: p.ID, Ord: int32(i), SubjectKind: r.SubjectKind,
				SubjectProject: r.SubjectProject, SubjectKey: r.SubjectKey, SubjectVersion: int32(r.SubjectVersion),
				Decision: r.Decision, Section: r.Section, Position: int32(r.Position), Tokens: int32(r.Tokens),
				Rank: int32(r.Rank), Rule: r.Rule, Reason: r.Reason, Detail: r.Detail, Layer: r.Layer,
				AdminOnly: r.AdminOnly, CreatedAt: p.CreatedAt,
			}
			if r.Span != nil {
				start, end := int32(r.Span.Start), int32(r.Span.End)
				row.SpanStart, row.SpanEnd = &start, &end
			}
			rows[i] = row
		}
		if _, err := store.Q.PacketRecordInsertMany(ctx, tx, rows); err != nil {
			return store.Interpret(err)
		}
		return nil
	})
}

func sha256sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}
