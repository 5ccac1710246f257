package store

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/store/internal/dbsqlc"
)

// Redaction is a redaction and its progress.
type Redaction struct {
	Project, ID, Key          string
	Version                   int
	Reason, CreatedBy         string
	CreatedAt                 time.Time
	Status                    string // running, done, failed
	PacketsTotal, PacketsDone int
	Error                     string
}

func redactionOf(r dbsqlc.Redaction) Redaction {
	return Redaction{Project: r.Project, ID: r.ID, Key: r.Key, Version: int(r.Version), Reason: r.Reason,
		CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt.UTC(), Status: r.Status, PacketsTotal: int(r.PacketsTotal),
		PacketsDone: int(r.PacketsDone), Error: r.Error}
}

func redactionRow(r dbsqlc.Redaction) audit.RedactionRow {
	return audit.RedactionRow{Project: r.Project, ID: r.ID, Key: r.Key, Version: int(r.Version), Reason: r.Reason,
		CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt}
}

// RedactionStart records a redaction of a version and removes its
// content: the version's text (through contextd_redact_version, the one
// path allowed to change it), its chain entry's body (replaced by
// audit.RedactedBody, the hashes kept), the stored idempotency answers that
// hold the text, with the redaction's own chain entry. The packets are
// redacted after, in pages (RedactPackets); packetProjects are the
// projects whose packets may have included the version (every project for
// a _shared item).
func (tx *Tx) RedactionStart(ctx context.Context, r Redaction, content string, packetProjects []string) (Redaction, error) {
	var total int64
	for _, pp := range packetProjects {
		n, err := q.RedactionUseCount(ctx, tx.ex, dbsqlc.RedactionUseCountParams{Project: pp, SubjectProject: r.Project, Key: r.Key, Version: int32(r.Version)})
		if err != nil {
			return Redaction{}, interpret(err)
		}
		total += n
	}
	row, err := q.RedactionInsert(ctx, tx.ex, dbsqlc.RedactionInsertParams{Project: r.Project, ID: r.ID, Key: r.Key,
		Version: int32(r.Version), Reason: r.Reason, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, PacketsTotal: int32(total)})
	if err != nil {
		return Redaction{}, interpret(err)
	}
	subject := audit.ItemVersionSubject(r.Key, r.Version)
	if err := q.RedactVersion(ctx, tx.ex, dbsqlc.RedactVersionParams{Project: r.Project, Key: r.Key, Version: int32(r.Version),
		Body: audit.RedactedBody(audit.KindItemVersion, subject, r.ID)}); err != nil {
		return Redaction{}, interpret(err)
	}
	n, err := q.ItemSearchRefresh(ctx, tx.ex, dbsqlc.ItemSearchRefreshParams{Project: r.Project, Key: r.Key, Version: int32(r.Version)})
	if err != nil {
		return Redaction{}, interpret(err)
	}
	if n > 0 { // the current version: its relevance index rows go with its words
		keys := []string{r.Key}
		if err := q.ItemTermsDelete(ctx, tx.ex, dbsqlc.ItemTermsDeleteParams{Project: r.Project, Keys: keys}); err != nil {
			return Redaction{}, interpret(err)
		}
		if err := q.ItemTermsInsert(ctx, tx.ex, dbsqlc.ItemTermsInsertParams{Project: r.Project, Keys: keys}); err != nil {
			return Redaction{}, interpret(err)
		}
	}
	if content != "" {
		esc, _ := json.Marshal(content)
		if _, err := q.IdempotencyKeysDeleteHolding(ctx, tx.ex, dbsqlc.IdempotencyKeysDeleteHoldingParams{
			Raw: content, Escaped: strings.TrimSuffix(strings.TrimPrefix(string(esc), `"`), `"`)}); err != nil {
			return Redaction{}, interpret(err)
		}
	}
	body, err := audit.RedactionBody(redactionRow(row))
	if err := tx.entry(r.Project, audit.KindRedaction, r.ID, body, err); err != nil {
		return Redaction{}, err
	}
	return redactionOf(row), nil
}

// RedactionGet is a redaction by id.
func (db DB) RedactionGet(ctx context.Context, project, id string) (Redaction, error) {
	r, err := q.RedactionGet(ctx, db.ex, dbsqlc.RedactionGetParams{Project: project, ID: id})
	if err != nil {
		return Redaction{}, interpret(err)
	}
	return redactionOf(r), nil
}

// RedactionsRunning are the redactions whose packets are not all done.
func (db DB) RedactionsRunning(ctx context.Context) ([]Redaction, error) {
	rows, err := q.RedactionsRunning(ctx, db.ex)
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]Redaction, len(rows))
	for i, r := range rows {
		out[i] = redactionOf(r)
	}
	return out, nil
}

// RedactionCursor is where a redaction's pass over its packets stands:
// newest first, before (Time, ID).
type RedactionCursor struct {
	Time time.Time
	ID   string
}

// RedactPackets overwrites the spans of the version in up to limit packets
// before cur (newest first), with marker cut or padded to each span's
// length, and reports how many it did and where to go on (done when
// fewer than limit).
func (tx *Tx) RedactPackets(ctx context.Context, r Redaction, packetProject string, cur RedactionCursor, limit int, marker string) (int, RedactionCursor, error) {
	rows, err := q.RedactionUses(ctx, tx.ex, dbsqlc.RedactionUsesParams{Project: packetProject, SubjectProject: r.Project,
		Key: r.Key, Version: int32(r.Version), BeforeTime: cur.Time, BeforeID: cur.ID, Lim: int32(limit)})
	if err != nil {
		return 0, cur, interpret(err)
	}
	spans := map[string][]int32{}
	var order []string
	for _, u := range rows {
		if _, ok := spans[u.PacketID]; !ok {
			order = append(order, u.PacketID)
		}
		spans[u.PacketID] = append(spans[u.PacketID], *u.SpanStart, *u.SpanEnd)
		cur = RedactionCursor{Time: u.CreatedAt, ID: u.PacketID}
	}
	for _, id := range order {
		if err := q.RedactPacket(ctx, tx.ex, dbsqlc.RedactPacketParams{Project: packetProject, ID: id, Spans: spans[id], Marker: marker}); err != nil {
			return 0, cur, interpret(err)
		}
	}
	return len(rows), cur, nil
}

// RedactionProgress records how far a redaction is.
func (db DB) RedactionProgress(ctx context.Context, r Redaction) error {
	return interpret(q.RedactionProgress(ctx, db.ex, dbsqlc.RedactionProgressParams{Project: r.Project, ID: r.ID,
		PacketsDone: int32(r.PacketsDone), Status: r.Status, Error: r.Error}))
}

// RedactionBodies recomputes the entry bodies of redactions from their
// rows, by id.
func (db DB) RedactionBodies(ctx context.Context, project string, ids []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := q.RedactionGetMany(ctx, db.ex, dbsqlc.RedactionGetManyParams{Project: project, Ids: ids})
	if err != nil {
		return nil, interpret(err)
	}
	for _, r := range rows {
		out[r.ID] = bodyOrMark(audit.RedactionBody(redactionRow(r)))
	}
	return out, nil
}

// RedactionsOf are the redactions of some versions of a project's items.
func (db DB) RedactionsOf(ctx context.Context, project string, keys []string, versions []int32) ([]Redaction, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	rows, err := q.RedactionsOfVersions(ctx, db.ex, dbsqlc.RedactionsOfVersionsParams{Project: project, Keys: keys, Versions: versions})
	if err != nil {
		return nil, interpret(err)
	}
	out := make([]Redaction, len(rows))
	for i, r := range rows {
		out[i] = redactionOf(r)
	}
	return out, nil
}
