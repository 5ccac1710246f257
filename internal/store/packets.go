package store

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/contextd/contextd/internal/audit"
	"time"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/store/internal/dbsqlc"
)

// Packet is a stored packet; its JSON documents (request, predecessors,
// gaps, provenance) stay as the packet service wrote them.
type Packet struct {
	Project, ID, CreatedBy, TargetRole, TaskID string
	CreatedAt                                  time.Time
	Request, Predecessors                      json.RawMessage
	Format, Tokenizer, Rendered                string
	RenderedSHA256                             []byte
	TokenBudget, TokensUsed                    int
	Gaps, ProvenanceSummary                    json.RawMessage
	Snapshot                                   string
	// Pipeline is the version of the pipeline that made the packet;
	// BudgetCutoff ({"rank","headroom","count"}) is nil when its budget
	// tried every candidate; GapsMore counts the gaps not listed.
	Pipeline     int
	BudgetCutoff json.RawMessage
	GapsMore     int
	// RenderVersion is the version of the text layout (1: every packet
	// before migration 00020).
	RenderVersion int
	// AblationOf is the packet a counterfactual packet was made from
	// (migration 00032); empty for every other packet.
	AblationOf string
}

func packetOf(r dbsqlc.Packet) Packet {
	return Packet{
		Project: r.Project, ID: r.ID, CreatedAt: r.CreatedAt.UTC(), CreatedBy: r.CreatedBy, TargetRole: r.TargetRole, TaskID: r.TaskID,
		Request: r.Request, Predecessors: r.Predecessors, Format: r.Format, Tokenizer: r.Tokenizer, Rendered: r.Rendered,
		RenderedSHA256: r.RenderedSha256, TokenBudget: int(r.TokenBudget), TokensUsed: int(r.TokensUsed), Gaps: r.Gaps,
		ProvenanceSummary: r.ProvenanceSummary, Snapshot: r.Snapshot,
		Pipeline: int(r.Pipeline), BudgetCutoff: r.BudgetCutoff, GapsMore: int(r.GapsMore), RenderVersion: int(r.RenderVersion),
		AblationOf: deref(r.AblationOf),
	}
}

// PacketGet is a packet without its records.
func (db DB) PacketGet(ctx context.Context, project, id string) (Packet, error) {
	r, err := q.PacketGet(ctx, db.ex, dbsqlc.PacketGetParams{Project: project, ID: id})
	if err != nil {
		return Packet{}, interpret(err)
	}
	return packetOf(r), nil
}

// PacketAblationIDs is the ids of the ablations made of a packet, oldest
// first, at most max.
func (db DB) PacketAblationIDs(ctx context.Context, project, id string, max int) ([]string, error) {
	ids, err := q.PacketAblationIDs(ctx, db.ex, dbsqlc.PacketAblationIDsParams{Project: project, PacketID: &id, Max: int32(max)})
	if err != nil {
		return nil, interpret(err)
	}
	return ids, nil
}

// PacketRecordList is a packet's records, in order.
func (db DB) PacketRecordList(ctx context.Context, project, id string) ([]ctxtype.Record, error) {
	rows, err := q.PacketRecordList(ctx, db.ex, dbsqlc.PacketRecordListParams{Project: project, PacketID: id})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]ctxtype.Record, len(rows))
	for i, r := range rows {
		out[i] = recordOf(r)
	}
	return out, nil
}

// PacketRecordListMany is the records of several packets, by packet id, in
// one query.
func (db DB) PacketRecordListMany(ctx context.Context, project string, ids []string) (map[string][]ctxtype.Record, error) {
	rows, err := q.PacketRecordListMany(ctx, db.ex, dbsqlc.PacketRecordListManyParams{Project: project, PacketIds: ids})
	if err != nil {
		return nil, interpret(err)
	}
	out := make(map[string][]ctxtype.Record, len(ids))
	for _, r := range rows {
		out[r.PacketID] = append(out[r.PacketID], recordOf(r))
	}
	return out, nil
}

func recordOf(r dbsqlc.PacketRecord) ctxtype.Record {
	rec := ctxtype.Record{
		SubjectKind: r.SubjectKind, SubjectProject: r.SubjectProject, SubjectKey: r.SubjectKey, SubjectVersion: int(r.SubjectVersion),
		Decision: r.Decision, Section: r.Section, Position: int(r.Position), Tokens: int(r.Tokens), Rank: int(r.Rank),
		Rule: r.Rule, Reason: r.Reason, Detail: r.Detail, Layer: r.Layer, AdminOnly: r.AdminOnly,
	}
	if r.SpanStart != nil && r.SpanEnd != nil {
		rec.Span = &ctxtype.Span{Start: int(*r.SpanStart), End: int(*r.SpanEnd)}
	}
	return rec
}

// PacketListParams filters a listing of packets, newest first.
type PacketListParams struct {
	Project                   string
	TaskID, TargetRole, Agent string // empty: any
	Since                     *time.Time
	HasCursor                 bool
	CursorTime                time.Time
	CursorID                  string
	Max                       int
}

// PacketList is a page of packets (without records), newest first.
func (db DB) PacketList(ctx context.Context, p PacketListParams) ([]Packet, error) {
	rows, err := q.PacketList(ctx, db.ex, dbsqlc.PacketListParams{
		Project: p.Project, TaskID: nullable(p.TaskID), TargetRole: nullable(p.TargetRole), Agent: nullable(p.Agent), Since: p.Since,
		HasCursor: p.HasCursor, CursorTime: p.CursorTime, CursorID: p.CursorID, Max: int32(p.Max),
	})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]Packet, len(rows))
	for i, r := range rows {
		out[i] = packetOf(r)
	}
	return out, nil
}

// PacketListTask is every packet of a task, oldest first, for its timeline
// (id, time, agent, role and request only).
func (db DB) PacketListTask(ctx context.Context, project, taskID string) ([]Packet, error) {
	rows, err := q.PacketListTask(ctx, db.ex, dbsqlc.PacketListTaskParams{Project: project, TaskID: taskID})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]Packet, len(rows))
	for i, r := range rows {
		out[i] = Packet{Project: project, ID: r.ID, CreatedAt: r.CreatedAt.UTC(), CreatedBy: r.CreatedBy, TargetRole: r.TargetRole, TaskID: taskID, Request: r.Request}
	}
	return out, nil
}

// PacketInsert writes a packet and its records. Both statements wait to
// go with the transaction's next one, its COMMIT for a packet stored alone
// (with the audit entry appended there too): one round trip for the whole
// write, where COPY of the records cost two of its own. An error of either
// is reported by that next statement.
func (tx *Tx) PacketInsert(ctx context.Context, p Packet, records []ctxtype.Record) error {
	rp, recs := recordRows(p, records)
	err := tx.waitForNext(ctx, func() error {
		err := q.PacketInsert(ctx, tx.ex, dbsqlc.PacketInsertParams{
			Project: p.Project, ID: p.ID, CreatedAt: p.CreatedAt, CreatedBy: p.CreatedBy, TargetRole: p.TargetRole,
			TaskID: p.TaskID, Request: p.Request, Predecessors: p.Predecessors, Format: p.Format, Tokenizer: p.Tokenizer, Rendered: p.Rendered,
			RenderedSha256: p.RenderedSHA256, TokenBudget: int32(p.TokenBudget), TokensUsed: int32(p.TokensUsed), Gaps: p.Gaps,
			ProvenanceSummary: p.ProvenanceSummary, Snapshot: p.Snapshot,
			Pipeline: int16(p.Pipeline), BudgetCutoff: p.BudgetCutoff, GapsMore: int32(p.GapsMore), RenderVersion: int16(max(p.RenderVersion, 1)),
			AblationOf: nullable(p.AblationOf),
		})
		if err != nil {
			return err
		}
		return q.PacketRecordInsertRows(ctx, tx.ex, rp)
	})
	if err != nil {
		return interpret(err)
	}
	body, err := audit.PacketBody(packetRow(p), recs)
	if err := tx.entry(p.Project, audit.KindPacket, p.ID, body, err); err != nil {
		return err
	}
	tx.tc.entries[len(tx.tc.entries)-1].rows = len(records)
	return nil
}

// recordRows is a packet's records as PacketRecordInsertRows sends them,
// and as the audit entry's body holds them (the rows as sent are the rows
// as stored).
func recordRows(p Packet, records []ctxtype.Record) (dbsqlc.PacketRecordInsertRowsParams, []audit.RecordRow) {
	n := len(records)
	// The columns' arrays at their final size: appended from empty, the
	// seventeen of them took twice the memory (~80 records a packet).
	rp := dbsqlc.PacketRecordInsertRowsParams{
		Project: p.Project, PacketID: p.ID, CreatedAt: p.CreatedAt,
		Ords: make([]int32, 0, n), SubjectKinds: make([]string, 0, n), SubjectProjects: make([]string, 0, n),
		SubjectKeys: make([]string, 0, n), SubjectVersions: make([]int32, 0, n), Decisions: make([]string, 0, n),
		Sections: make([]string, 0, n), Positions: make([]int32, 0, n), SpanStarts: make([]int32, 0, n),
		SpanEnds: make([]int32, 0, n), Tokens: make([]int32, 0, n), Ranks: make([]int32, 0, n),
		Rules: make([]string, 0, n), Reasons: make([]string, 0, n), Details: make([]string, 0, n),
		Layers: make([]string, 0, n), AdminOnlys: make([]bool, 0, n),
	}
	recs := make([]audit.RecordRow, n)
	for i, r := range records {
		row := dbsqlc.PacketRecord{
			Project: p.Project, PacketID: p.ID, Ord: int32(i), SubjectKind: r.SubjectKind,
			SubjectProject: r.SubjectProject, SubjectKey: r.SubjectKey, SubjectVersion: int32(r.SubjectVersion),
			Decision: r.Decision, Section: r.Section, Position: int32(r.Position), Tokens: int32(r.Tokens),
			Rank: int32(r.Rank), Rule: r.Rule, Reason: r.Reason, Detail: r.Detail, Layer: r.Layer,
			AdminOnly: r.AdminOnly, CreatedAt: p.CreatedAt,
		}
		start, end := int32(-1), int32(-1)
		if r.Span != nil {
			start, end = int32(r.Span.Start), int32(r.Span.End)
			row.SpanStart, row.SpanEnd = &start, &end
		}
		recs[i] = recordRow(row)
		rp.Ords, rp.SubjectKinds, rp.SubjectProjects = append(rp.Ords, row.Ord), append(rp.SubjectKinds, row.SubjectKind), append(rp.SubjectProjects, row.SubjectProject)
		rp.SubjectKeys, rp.SubjectVersions, rp.Decisions = append(rp.SubjectKeys, row.SubjectKey), append(rp.SubjectVersions, row.SubjectVersion), append(rp.Decisions, row.Decision)
		rp.Sections, rp.Positions, rp.SpanStarts, rp.SpanEnds = append(rp.Sections, row.Section), append(rp.Positions, row.Position), append(rp.SpanStarts, start), append(rp.SpanEnds, end)
		rp.Tokens, rp.Ranks, rp.Rules, rp.Reasons = append(rp.Tokens, row.Tokens), append(rp.Ranks, row.Rank), append(rp.Rules, row.Rule), append(rp.Reasons, row.Reason)
		rp.Details, rp.Layers, rp.AdminOnlys = append(rp.Details, row.Detail), append(rp.Layers, row.Layer), append(rp.AdminOnlys, row.AdminOnly)
	}
	return rp, recs
}

// Injection is one packet that included an item.
type Injection struct {
	PacketID, Project, TargetRole, CreatedBy, Section, Rule string
	SubjectVersion                                          int
	CreatedAt                                               time.Time
}

// InjectionListParams filters the reverse lookup, newest first.
type InjectionListParams struct {
	Project                    string // the packets' project
	SubjectProject, SubjectKey string
	Version                    *int
	Since, Until               *time.Time
	HasCursor                  bool
	CursorTime                 time.Time
	CursorID                   string
	Max                        int
}

// InjectionList is a page of the packets that included an item.
func (db DB) InjectionList(ctx context.Context, p InjectionListParams) ([]Injection, error) {
	params := dbsqlc.PacketRecordInjectionsParams{
		Project: p.Project, SubjectProject: p.SubjectProject, SubjectKey: p.SubjectKey, Since: p.Since, Until: p.Until,
		HasCursor: p.HasCursor, CursorTime: p.CursorTime, CursorID: p.CursorID, Max: int32(p.Max),
	}
	if p.Version != nil {
		v := int32(*p.Version)
		params.Version = &v
	}
	rows, err := q.PacketRecordInjections(ctx, db.ex, params)
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]Injection, len(rows))
	for i, r := range rows {
		out[i] = Injection{PacketID: r.PacketID, Project: r.Project, TargetRole: r.TargetRole, CreatedBy: r.CreatedBy,
			Section: r.Section, Rule: r.Rule, SubjectVersion: int(r.SubjectVersion), CreatedAt: r.CreatedAt.UTC()}
	}
	return out, nil
}

// PacketUse is a packet that used a handoff as a predecessor.
type PacketUse struct {
	PacketID, TargetRole, CreatedBy string
	CreatedAt                       time.Time
}

// PacketHandoffUses is every packet that used a handoff as a predecessor.
func (db DB) PacketHandoffUses(ctx context.Context, project, handoffID string) ([]PacketUse, error) {
	rows, err := q.PacketRecordHandoffUses(ctx, db.ex, dbsqlc.PacketRecordHandoffUsesParams{Project: project, HandoffID: handoffID})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]PacketUse, len(rows))
	for i, r := range rows {
		out[i] = PacketUse{PacketID: r.PacketID, TargetRole: r.TargetRole, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt.UTC()}
	}
	return out, nil
}

// ReadPoint is the time and snapshot of a Snapshot transaction.
type ReadPoint struct {
	Now      time.Time
	Snapshot string
}

// PacketReadPoint is the snapshot transaction's time and identity; it
// refuses to run outside a repeatable-read transaction, where a snapshot
// would not hold. (On DB, so that a Tx's first reads (Tx.Reads) may send
// it with theirs.)
func (db DB) PacketReadPoint(ctx context.Context) (ReadPoint, error) {
	r, err := q.PacketReadPoint(ctx, db.ex)
	if err != nil {
		return ReadPoint{}, interpret(err)
	}
	if r.Isolation != "repeatable read" {
		return ReadPoint{}, fmt.Errorf("packet reads need a repeatable-read transaction, not %s", r.Isolation)
	}
	return ReadPoint{Now: r.Now.UTC(), Snapshot: r.Snapshot}, nil
}

// SnapshotVersions is the current version of every item of the projects
// (or of one key, when key is not empty) as a stored snapshot saw it.
func (db DB) SnapshotVersions(ctx context.Context, projects []string, key, snapshot string) ([]*ctxtype.Version, error) {
	rows, err := q.SnapshotVersions(ctx, db.ex, dbsqlc.SnapshotVersionsParams{Projects: projects, Key: nullable(key), Snapshot: snapshot})
	return versionsOf(rows), interpret(err)
}

// SnapshotRank is one relevance rank a snapshot would have computed.
type SnapshotRank struct {
	Project, Key string
	Rank         float64
}

// SnapshotRelevance is pipeline 1's relevance ranking (ts_rank_cd over
// every match) as a stored snapshot saw it: pipeline 1 packets replay with it.
func (db DB) SnapshotRelevance(ctx context.Context, projects []string, snapshot, query string, at time.Time, max int) ([]SnapshotRank, error) {
	rows, err := q.SnapshotRelevance(ctx, db.ex, dbsqlc.SnapshotRelevanceParams{Projects: projects, Snapshot: snapshot, Query: query, At: at, Max: int32(max)})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]SnapshotRank, len(rows))
	for i, r := range rows {
		out[i] = SnapshotRank{Project: r.Project, Key: r.Key, Rank: r.Rank}
	}
	return out, nil
}
