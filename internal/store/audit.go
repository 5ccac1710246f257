package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/store/internal/dbsqlc"
)

// entry adds an audit entry of the transaction's writes to chain; they
// are appended with COMMIT (appendEntries). A body that cannot be encoded
// fails the write: nothing is written without its entry.
func (tx *Tx) entry(chain, kind, subject string, body []byte, err error) error {
	if err != nil {
		return fmt.Errorf("audit entry %s %s: %w", kind, subject, err)
	}
	tx.tc.entries = append(tx.tc.entries, pendingEntry{chain: chain, kind: kind, subject: subject, body: body})
	return nil
}

// bulkAppendMin is the fewest entries a transaction appends by COPY
// rather than within a statement sent with COMMIT.
const bulkAppendMin = 256

// appendEntries appends the transaction's entries, in chain order (one
// lock order for every writer). A sealed transaction, or one of
// bulkAppendMin entries or more, takes each chain's head lock first and
// hashes here (appendSealed): a round trip more, holding the lock from
// there to COMMIT. Otherwise one contextd_audit_append per chain goes with
// COMMIT, so each head's lock is held for the commit alone.
func (tx *Tx) appendEntries(ctx context.Context) error {
	es := tx.tc.entries
	tx.tc.entries = nil
	slices.SortStableFunc(es, func(a, b pendingEntry) int { return strings.Compare(a.chain, b.chain) })
	if len(es) == 0 {
		return nil
	}
	if tx.seal != nil || len(es) >= bulkAppendMin {
		return tx.appendSealed(ctx, es)
	}
	for i := 0; i < len(es); {
		p := dbsqlc.AuditAppendParams{Chain: es[i].chain}
		for ; i < len(es) && es[i].chain == p.Chain; i++ {
			p.Kinds, p.Subjects, p.Bodies = append(p.Kinds, es[i].kind), append(p.Subjects, es[i].subject), append(p.Bodies, es[i].body)
		}
		if err := q.AuditAppend(ctx, atCommitExec{tx.tc}, p); err != nil {
			return interpret(err)
		}
	}
	return nil
}

// auditItemVersions adds the entries of the versions just written, their
// bodies computed from the very rows sent (audit.ItemVersionBody).
func (tx *Tx) auditItemVersions(project string, rows []dbsqlc.ItemVersionInsertManyParams) error {
	for _, r := range rows {
		// The row as sent has the columns of the row as read back, in order.
		body, err := audit.ItemVersionBody(auditRowOfStored(dbsqlc.ItemVersionAuditRowsRow(r)))
		if err := tx.entry(project, audit.KindItemVersion, audit.ItemVersionSubject(r.Key, int(r.Version)), body, err); err != nil {
			return err
		}
	}
	return nil
}

func auditRowOfStored(r dbsqlc.ItemVersionAuditRowsRow) audit.ItemVersionRow {
	return audit.ItemVersionRow{
		Project: r.Project, Key: r.Key, Version: int(r.Version), Deleted: r.Deleted,
		Kind: r.Kind, Source: r.Source, Title: r.Title, Summary: r.Summary, Content: r.Content,
		Priority: int(r.Priority), Authority: r.Authority, Confidence: r.Confidence, StateKey: r.StateKey,
		ValidFrom: r.ValidFrom, ValidUntil: r.ValidUntil, Slot: r.Slot, Trigger: r.Trigger,
		VisibleTo: r.VisibleTo, HiddenFrom: r.HiddenFrom, Template: r.Template,
		Metadata: r.Metadata, Provenance: r.Provenance, FieldsSHA256: r.FieldsSha256, ContentSHA256: r.ContentSha256,
		TokensO200k: int(r.TokensO200k), TokensCl100k: int(r.TokensCl100k),
		BlockTokensO200k: int(r.BlockTokensO200k), BlockTokensCl100k: int(r.BlockTokensCl100k),
		CreatedAt: r.CreatedAt, CreatedBy: r.CreatedBy,
	}
}

// AuditEntries is a page of a chain after seq after.
func (db DB) AuditEntries(ctx context.Context, chain string, after int64, limit int) ([]audit.Entry, error) {
	rows, err := q.AuditEntriesPage(ctx, db.ex, dbsqlc.AuditEntriesPageParams{Chain: chain, After: after, Lim: int32(limit)})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]audit.Entry, len(rows))
	for i, r := range rows {
		out[i] = audit.Entry{Seq: r.Seq, Kind: r.Kind, Subject: r.Subject, Body: r.Body, EntryHash: r.EntryHash, ChainHash: r.ChainHash}
		if r.SealFirst != nil && r.SealKind != nil {
			out[i].Seal = &audit.Seal{First: *r.SealFirst, Kind: *r.SealKind, Signature: r.SealSignature}
		}
	}
	return out, nil
}

// AuditHead is a chain's last seq and chain hash (0 and audit.Genesis for
// a chain with no entry).
func (db DB) AuditHead(ctx context.Context, chain string) (int64, []byte, error) {
	r, err := q.AuditHead(ctx, db.ex, chain)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, audit.Genesis, nil
	}
	if err != nil {
		return 0, nil, interpret(err)
	}
	return r.Seq, r.Hash, nil
}

// ItemVersionBodies recomputes the entry bodies of item versions from
// their rows as stored now, by subject (audit.ItemVersionSubject); a
// version whose row is gone has none.
func (db DB) ItemVersionBodies(ctx context.Context, project string, keys []string, versions []int32) (map[string][]byte, error) {
	rows, err := q.ItemVersionAuditRows(ctx, db.ex, dbsqlc.ItemVersionAuditRowsParams{Project: project, Keys: keys, Versions: versions})
	if err != nil {
		return nil, interpret(err)
	}
	out := make(map[string][]byte, len(rows))
	for _, r := range rows {
		out[audit.ItemVersionSubject(r.Key, int(r.Version))] = bodyOrMark(audit.ItemVersionBody(auditRowOfStored(r)))
	}
	return out, nil
}

// VersionKey is an item version's (key, version).
type VersionKey struct {
	Key     string
	Version int
}

// ItemVersionKeys is a page of a project's item versions in (key,
// version) order after (afterKey, afterVersion).
func (db DB) ItemVersionKeys(ctx context.Context, project, afterKey string, afterVersion, limit int) ([]VersionKey, error) {
	rows, err := q.ItemVersionKeysPage(ctx, db.ex, dbsqlc.ItemVersionKeysPageParams{
		Project: project, AfterKey: afterKey, AfterVersion: int32(afterVersion), Lim: int32(limit)})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]VersionKey, len(rows))
	for i, r := range rows {
		out[i] = VersionKey{Key: r.Key, Version: int(r.Version)}
	}
	return out, nil
}

// ItemState is an item row's current version and liveness.
type ItemState struct {
	Key     string
	Current int
	Live    bool
	// Mirrors: the row's copies of its current version's columns (what
	// packets are assembled from) are the version's.
	Mirrors bool
}

// ItemStates is a page of a project's item rows in key order after
// afterKey.
func (db DB) ItemStates(ctx context.Context, project, afterKey string, limit int) ([]ItemState, error) {
	rows, err := q.ItemStatePage(ctx, db.ex, dbsqlc.ItemStatePageParams{Project: project, AfterKey: afterKey, Lim: int32(limit)})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]ItemState, len(rows))
	for i, r := range rows {
		out[i] = ItemState{Key: r.Key, Current: int(r.CurrentVersion), Live: r.Live, Mirrors: r.Mirrors}
	}
	return out, nil
}

func handoffRow(r dbsqlc.Handoff) audit.HandoffRow {
	return audit.HandoffRow{
		Project: r.Project, ID: r.ID, TaskID: r.TaskID, WorkflowRunID: r.WorkflowRunID, ReworkOf: r.ReworkOf,
		SourceRole: r.SourceRole, SourceAgentID: r.SourceAgentID, TargetRole: r.TargetRole,
		TargetPermission: r.TargetPermission, Intent: r.Intent, PacketID: r.PacketID, Manifest: r.Manifest,
		CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, Status: r.Status, StatusReason: r.StatusReason,
		SupersededBy: r.SupersededBy, UpdatedAt: r.UpdatedAt,
	}
}

// auditHandoff adds the entry of a handoff as it now is.
func (tx *Tx) auditHandoff(r dbsqlc.Handoff) error {
	body, err := audit.HandoffBody(handoffRow(r))
	return tx.entry(r.Project, audit.KindHandoff, r.ID, body, err)
}

func handoffEventRow(r dbsqlc.HandoffEvent) audit.HandoffEventRow {
	return audit.HandoffEventRow{Project: r.Project, Seq: r.Seq, HandoffID: r.HandoffID, Event: r.Event,
		FromStatus: r.FromStatus, ToStatus: r.ToStatus, Actor: r.Actor, ActorRole: r.ActorRole, Reason: r.Reason, CreatedAt: r.CreatedAt}
}

func projectRow(r dbsqlc.Project) audit.ProjectRow {
	return audit.ProjectRow{Project: r.Project, Description: r.Description, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		ArchivedAt: r.ArchivedAt, ArchivedBy: r.ArchivedBy, RestoredAt: r.RestoredAt, RestoredBy: r.RestoredBy,
		OnExcessAuthority: r.OnExcessAuthority}
}

func packetRow(p Packet) audit.PacketRow {
	return audit.PacketRow{
		Project: p.Project, ID: p.ID, CreatedBy: p.CreatedBy, TargetRole: p.TargetRole, TaskID: p.TaskID,
		CreatedAt: p.CreatedAt, Request: p.Request, Predecessors: p.Predecessors, Format: p.Format,
		Tokenizer: p.Tokenizer, Rendered: p.Rendered, RenderedSHA256: p.RenderedSHA256, TokenBudget: p.TokenBudget,
		TokensUsed: p.TokensUsed, Gaps: p.Gaps, ProvenanceSummary: p.ProvenanceSummary, Snapshot: p.Snapshot,
		Pipeline: p.Pipeline, BudgetCutoff: p.BudgetCutoff, GapsMore: p.GapsMore,
	}
}

func recordRow(r dbsqlc.PacketRecord) audit.RecordRow {
	return audit.RecordRow{
		Ord: int(r.Ord), SubjectKind: r.SubjectKind, SubjectProject: r.SubjectProject, SubjectKey: r.SubjectKey,
		SubjectVersion: int(r.SubjectVersion), Decision: r.Decision, Section: r.Section, Position: int(r.Position),
		SpanStart: r.SpanStart, SpanEnd: r.SpanEnd, Tokens: int(r.Tokens), Rank: int(r.Rank), Rule: r.Rule,
		Reason: r.Reason, Detail: r.Detail, Layer: r.Layer, AdminOnly: r.AdminOnly,
	}
}

// PacketBodies recomputes the entry bodies of packets from their rows and
// records as stored now, by id; a packet whose row is gone has none.
func (db DB) PacketBodies(ctx context.Context, project string, ids []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	if len(ids) == 0 {
		return out, nil
	}
	ps, err := q.PacketAuditRows(ctx, db.ex, dbsqlc.PacketAuditRowsParams{Project: project, Ids: ids})
	if err != nil {
		return nil, interpret(err)
	}
	rs, err := q.PacketRecordAuditRows(ctx, db.ex, dbsqlc.PacketRecordAuditRowsParams{Project: project, Ids: ids})
	if err != nil {
		return nil, interpret(err)
	}
	recs := map[string][]audit.RecordRow{}
	for _, r := range rs {
		recs[r.PacketID] = append(recs[r.PacketID], recordRow(r))
	}
	for _, p := range ps {
		out[p.ID] = bodyOrMark(audit.PacketBody(packetRow(packetOf(p)), recs[p.ID]))
	}
	return out, nil
}

// bodyOrMark is a body recomputed from a row, or, for a row whose JSON no
// longer parses, a mark that equals no body (the row is not what was
// written).
func bodyOrMark(b []byte, err error) []byte {
	if err != nil {
		return []byte(fmt.Sprintf("unreadable row: %v", err))
	}
	return b
}

// HandoffEventBodies recomputes the entry bodies of handoff events from
// their rows, by subject (audit.HandoffEventSubject).
func (db DB) HandoffEventBodies(ctx context.Context, project string, seqs []int64) (map[string][]byte, error) {
	out := map[string][]byte{}
	if len(seqs) == 0 {
		return out, nil
	}
	rows, err := q.HandoffEventAuditRows(ctx, db.ex, dbsqlc.HandoffEventAuditRowsParams{Project: project, Seqs: seqs})
	if err != nil {
		return nil, interpret(err)
	}
	for _, r := range rows {
		out[audit.HandoffEventSubject(r.Seq)] = bodyOrMark(audit.HandoffEventBody(handoffEventRow(r)))
	}
	return out, nil
}

// SubjectBody is a row of a mutable kind as its entry body now.
type SubjectBody struct {
	Subject string
	Body    []byte
}

// HandoffBodies is a page of a project's handoffs by id after afterID, as
// their entry bodies now.
func (db DB) HandoffBodies(ctx context.Context, project, afterID string, limit int) ([]SubjectBody, error) {
	rows, err := q.HandoffAuditPage(ctx, db.ex, dbsqlc.HandoffAuditPageParams{Project: project, AfterID: afterID, Lim: int32(limit)})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]SubjectBody, len(rows))
	for i, r := range rows {
		out[i] = SubjectBody{Subject: r.ID, Body: bodyOrMark(audit.HandoffBody(handoffRow(r)))}
	}
	return out, nil
}

// ProjectBody is a project's row as its entry body now (fault.ErrNotFound
// when there is none).
func (db DB) ProjectBody(ctx context.Context, project string) ([]byte, error) {
	r, err := q.ProjectGet(ctx, db.ex, project)
	if err != nil {
		return nil, interpret(err)
	}
	return bodyOrMark(audit.ProjectBody(projectRow(r))), nil
}

// PacketIDs is a page of a project's packet ids after afterID.
func (db DB) PacketIDs(ctx context.Context, project, afterID string, limit int) ([]string, error) {
	ids, err := q.PacketIDPage(ctx, db.ex, dbsqlc.PacketIDPageParams{Project: project, AfterID: afterID, Lim: int32(limit)})
	return ids, interpret(err)
}

// HandoffEventSeqs is a page of a project's handoff event seqs after after.
func (db DB) HandoffEventSeqs(ctx context.Context, project string, after int64, limit int) ([]int64, error) {
	seqs, err := q.HandoffEventSeqPage(ctx, db.ex, dbsqlc.HandoffEventSeqPageParams{Project: project, After: after, Lim: int32(limit)})
	return seqs, interpret(err)
}

// AuditEntriesOf are the entries of one subject of a kind in a chain, in
// seq order (at most two: more than one is as wrong as two).
func (db DB) AuditEntriesOf(ctx context.Context, chain, kind, subject string) ([]audit.Entry, error) {
	rows, err := q.AuditEntryOf(ctx, db.ex, dbsqlc.AuditEntryOfParams{Chain: chain, Kind: kind, Subject: subject})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]audit.Entry, len(rows))
	for i, r := range rows {
		out[i] = audit.Entry{Seq: r.Seq, Kind: r.Kind, Subject: r.Subject, Body: r.Body, EntryHash: r.EntryHash, ChainHash: r.ChainHash}
	}
	return out, nil
}

// PacketTexts are the rendered texts of some of a project's packets, by
// id, in one query (a packet that is gone has none).
func (db DB) PacketTexts(ctx context.Context, project string, ids []string) (map[string]string, error) {
	rows, err := q.PacketAuditRows(ctx, db.ex, dbsqlc.PacketAuditRowsParams{Project: project, Ids: ids})
	if err != nil {
		return nil, interpret(err)
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		out[r.ID] = r.Rendered
	}
	return out, nil
}
