package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/ctxtype"
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
// audit.RedactedBody, the hashes kept), with the redaction's own chain
// entry; the caller rewrites the stored answers that hold the text
// (IdempotencyAnswersHolding). The packets are
// redacted after, in pages (RedactPackets); packetProjects are the
// projects whose packets may have included the version (every project for
// a _shared item).
func (tx *Tx) RedactionStart(ctx context.Context, r Redaction, packetProjects []string) (Redaction, error) {
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
	if err := q.RedactVersion(ctx, tx.ex, dbsqlc.RedactVersionParams{Project: r.Project, Redaction: r.ID}); err != nil {
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

// RedactPackets redacts up to limit of the packets of packetProject that
// included the version, before cur (newest first), through
// contextd_redact_packet (their spans, stored hash and entry body), each
// with a packet_redaction entry holding its new text's hash, and reports
// how many it did and where to go on (done when fewer than limit).
func (tx *Tx) RedactPackets(ctx context.Context, r Redaction, packetProject string, cur RedactionCursor, limit int) (int, RedactionCursor, error) {
	rows, err := q.RedactionUses(ctx, tx.ex, dbsqlc.RedactionUsesParams{Project: packetProject, SubjectProject: r.Project,
		Key: r.Key, Version: int32(r.Version), BeforeTime: cur.Time, BeforeID: cur.ID, Lim: int32(limit)})
	if err != nil {
		return 0, cur, interpret(err)
	}
	done := map[string]bool{}
	for _, u := range rows {
		cur = RedactionCursor{Time: u.CreatedAt, ID: u.PacketID}
		if done[u.PacketID] {
			continue
		}
		done[u.PacketID] = true
		h, err := q.RedactPacket(ctx, tx.ex, dbsqlc.RedactPacketParams{Project: packetProject, ID: u.PacketID, RedactionProject: r.Project, Redaction: r.ID})
		if err != nil {
			return 0, cur, interpret(err)
		}
		body, err := audit.PacketRedactionBody(packetProject, u.PacketID, h)
		if err := tx.entry(packetProject, audit.KindPacketRedaction, u.PacketID, body, err); err != nil {
			return 0, cur, err
		}
	}
	return len(rows), cur, nil
}

// PacketRedactionBodies recomputes the packet_redaction bodies of packets
// from their texts as they are now (a text whose stored hash no longer is
// its own gets none that could match).
func (db DB) PacketRedactionBodies(ctx context.Context, project string, ids []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := q.PacketRenderedHashes(ctx, db.ex, dbsqlc.PacketRenderedHashesParams{Project: project, Ids: ids})
	if err != nil {
		return nil, interpret(err)
	}
	for _, r := range rows {
		if string(r.RenderedNow) != string(r.RenderedSha256) {
			out[r.ID] = []byte("the stored hash is not the text's")
			continue
		}
		out[r.ID] = bodyOrMark(audit.PacketRedactionBody(project, r.ID, r.RenderedNow))
	}
	return out, nil
}

// RedactionIDs is a page of a project's redaction ids after afterID.
func (db DB) RedactionIDs(ctx context.Context, project, afterID string, limit int) ([]string, error) {
	ids, err := q.RedactionIDPage(ctx, db.ex, dbsqlc.RedactionIDPageParams{Project: project, AfterID: afterID, Lim: int32(limit)})
	return ids, interpret(err)
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

// IdempotencyAnswersHolding are the stored answers whose body holds text,
// raw or as JSON writes it, locked for the transaction.
func (tx *Tx) IdempotencyAnswersHolding(ctx context.Context, text string) ([]IdempotentAnswer, error) {
	if text == "" {
		return nil, nil
	}
	rows, err := q.IdempotencyKeysHolding(ctx, tx.ex, dbsqlc.IdempotencyKeysHoldingParams{Raw: text, Escaped: JSONEscaped(text)})
	if err != nil {
		return nil, interpret(err)
	}
	return answersOf(rows), nil
}

// IdempotencyAnswerRewrite replaces a stored answer's body and MAC.
func (tx *Tx) IdempotencyAnswerRewrite(ctx context.Context, a IdempotentAnswer) error {
	return interpret(q.IdempotencyKeyRewrite(ctx, tx.ex, dbsqlc.IdempotencyKeyRewriteParams{AgentID: a.AgentID, Key: a.Key, Body: a.Body, Mac: a.MAC}))
}

// JSONEscaped is text as a JSON answer writes it inside its quotes.
func JSONEscaped(text string) string {
	esc, _ := json.Marshal(text) // a string always encodes
	return strings.TrimSuffix(strings.TrimPrefix(string(esc), `"`), `"`)
}

// ClockNow is the database's clock.
func (db DB) ClockNow(ctx context.Context) (time.Time, error) {
	t, err := q.ClockNow(ctx, db.ex)
	return t, interpret(err)
}

// TransactionsBegunBefore counts the database's other transactions that
// began before t (pg_stat_activity: those of contextd's own login, which
// is every transaction that can assemble a packet).
func (db DB) TransactionsBegunBefore(ctx context.Context, t time.Time) (int, error) {
	n, err := q.TransactionsBegunBefore(ctx, db.ex, t)
	return int(n), interpret(err)
}

// RedactionUnchained says why a redaction's row is not one contextd
// recorded ("" when it is): it must have exactly one entry in its
// project's chain up to the head, whose body is the row as it is now, and
// (given check) a seal of the audit key covering it. A row the server's
// login inserted by itself has none.
func (db DB) RedactionUnchained(ctx context.Context, r Redaction, check audit.SealCheck) (string, error) {
	es, err := db.AuditEntriesOf(ctx, r.Project, audit.KindRedaction, r.ID)
	if err != nil {
		return "", err
	}
	if len(es) != 1 {
		return fmt.Sprintf("redaction %s has %d entries in the chain of %s, not one", r.ID, len(es), r.Project), nil
	}
	now, err := db.RedactionBodies(ctx, r.Project, []string{r.ID})
	if err != nil {
		return "", err
	}
	if e := es[0]; !bytes.Equal(e.Body, now[r.ID]) || !bytes.Equal(audit.Hash(e.Body), e.EntryHash) {
		return fmt.Sprintf("redaction %s's row is not what its entry at seq %d of %s says", r.ID, e.Seq, r.Project), nil
	}
	return db.unsealed(ctx, r.Project, es[0].Seq, check)
}

// unsealed says why the entry at seq is not sealed ("" when it is, or
// when check is nil).
func (db DB) unsealed(ctx context.Context, chain string, seq int64, check audit.SealCheck) (string, error) {
	if check == nil {
		return "", nil
	}
	ok, err := db.EntrySealed(ctx, chain, seq, check)
	if err != nil || ok {
		return "", err
	}
	return fmt.Sprintf("no seal of the audit key covers seq %d of %q", seq, chain), nil
}

// PacketTextUnproven says why a redacted packet's text is not the one its
// last packet_redaction entry up to the head vouches for ("" when it is),
// that entry sealed (given check).
func (db DB) PacketTextUnproven(ctx context.Context, project, id, rendered string, check audit.SealCheck) (string, error) {
	rows, err := q.AuditLatestOf(ctx, db.ex, dbsqlc.AuditLatestOfParams{Chain: project, Kind: audit.KindPacketRedaction, Subject: id})
	if err != nil {
		return "", interpret(err)
	}
	if len(rows) == 0 {
		return "no packet_redaction entry vouches for its text", nil
	}
	want, err := audit.PacketRedactionBody(project, id, audit.Hash([]byte(rendered)))
	if err != nil {
		return "", err
	}
	if e := rows[0]; !bytes.Equal(e.Body, want) || !bytes.Equal(audit.Hash(e.Body), e.EntryHash) {
		return fmt.Sprintf("its text is not the one its packet_redaction entry at seq %d vouches for", e.Seq), nil
	}
	return db.unsealed(ctx, project, rows[0].Seq, check)
}

// MarkersIn checks text, a packet's rendered text with its records, at
// every span of the version r removed: spans is how many there are, bad
// says the first that does not hold r's marker (audit.RedactionMarker),
// "" when all do. The server's verify and a replay both prove a redaction
// by it.
func (r Redaction) MarkersIn(text string, recs []ctxtype.Record) (spans int, bad string) {
	for _, rec := range recs {
		if rec.SubjectKind != ctxtype.SubjectItem || rec.Decision != "included" || rec.Span == nil ||
			rec.SubjectProject != r.Project || rec.SubjectKey != r.Key || rec.SubjectVersion != r.Version {
			continue
		}
		spans++
		s, e := rec.Span.Start, rec.Span.End
		if s < 0 || e > len(text) || s > e || text[s:e] != string(audit.RedactionMarker(r.ID, e-s)) {
			return spans, fmt.Sprintf("its text at [%d,%d) is not the marker of redaction %s", s, e, r.ID)
		}
	}
	return spans, ""
}
