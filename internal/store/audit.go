package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/store/internal/dbsqlc"
)

// auditItemVersions queues for COMMIT the chain entries of the versions
// just written: their bodies are computed here from the very rows sent
// (audit.ItemVersionBody), and contextd_audit_append links them under the
// chain head's lock, held for the commit alone.
func (tx *Tx) auditItemVersions(ctx context.Context, project string, rows []dbsqlc.ItemVersionInsertManyParams) error {
	p := dbsqlc.AuditAppendParams{Chain: project}
	for _, r := range rows {
		body, err := audit.ItemVersionBody(auditRowOfInsert(r))
		if err != nil {
			return fmt.Errorf("audit entry of %s/%s@%d: %w", project, r.Key, r.Version, err)
		}
		p.Kinds = append(p.Kinds, audit.KindItemVersion)
		p.Subjects = append(p.Subjects, audit.ItemVersionSubject(r.Key, int(r.Version)))
		p.Bodies = append(p.Bodies, body)
	}
	return interpret(q.AuditAppend(ctx, atCommitExec{tx.tc}, p))
}

func auditRowOfInsert(r dbsqlc.ItemVersionInsertManyParams) audit.ItemVersionRow {
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
		body, err := audit.ItemVersionBody(auditRowOfStored(r))
		if err != nil {
			// A row whose JSON no longer parses is not what was written;
			// its body stays absent from the answer's agreement.
			body = []byte(fmt.Sprintf("unreadable row: %v", err))
		}
		out[audit.ItemVersionSubject(r.Key, int(r.Version))] = body
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
		out[i] = ItemState{Key: r.Key, Current: int(r.CurrentVersion), Live: r.Live}
	}
	return out, nil
}
