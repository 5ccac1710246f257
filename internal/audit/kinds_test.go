package audit

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// packetFixture is a packet with records of every shape a body holds:
// spans set and not, escapes, non-ASCII text, an admin-only record.
func packetFixture() (PacketRow, []RecordRow) {
	at := time.Date(2026, 12, 6, 17, 1, 2, 345678000, time.UTC)
	one, two := int32(3), int32(41)
	p := PacketRow{
		Project: "acme", ID: "ctxpkt_fixture", CreatedBy: "agt_x", TargetRole: "implementer", TaskID: "T-1",
		CreatedAt: at, Request: []byte(`{"b": 2, "a": [1, "é"]}`), Predecessors: []byte(`[]`),
		Format: "markdown", Tokenizer: "o200k_base", Rendered: "# Context\n- refund: 14 days \"net\" — ok\n",
		RenderedSHA256: []byte{1, 2, 3}, TokenBudget: 16000, TokensUsed: 123,
		Gaps: []byte(`[]`), ProvenanceSummary: []byte(`{"items": 2}`), Snapshot: "10:12:", Pipeline: 2,
		BudgetCutoff: []byte(`{"tried": 5}`), GapsMore: 1,
	}
	recs := []RecordRow{
		{Ord: 0, SubjectKind: "item", SubjectProject: "acme", SubjectKey: "refund", SubjectVersion: 2,
			Decision: "included", Section: "Project Knowledge", Position: 0, SpanStart: &one, SpanEnd: &two,
			Tokens: 12, Rank: 1, Rule: "always", Reason: "", Detail: "", Layer: "project"},
		{Ord: 1, SubjectKind: "item", SubjectProject: "_shared", SubjectKey: "tone\t\"x\"", SubjectVersion: 1,
			Decision: "excluded", Section: "", Position: 0, Tokens: 40, Rank: 2, Rule: "keyword",
			Reason: "budget", Detail: "needs 40 tokens, 3 left — naïve", Layer: "shared", AdminOnly: true},
		{Ord: 2, SubjectKind: "request", SubjectKey: "history[0]", Decision: "included", Section: "Conversation",
			Position: 1, Tokens: 7, Rule: "request"},
	}
	return p, recs
}

// A packet entry's body is what every chain written so far holds: its
// bytes may not change. The digest was taken with the code before
// RecordsDigest reused one buffer for all records (2026-12-06).
func TestPacketBodyIsStable(t *testing.T) {
	p, recs := packetFixture()
	body, err := PacketBody(p, recs)
	require.NoError(t, err)
	sum := sha256.Sum256(body)
	require.Equal(t, "f8944fe30fe5a1c1dc008ba450b6472952449062cb249e9f66ab33ce5e5662c0", hex.EncodeToString(sum[:]), string(body))
}

// RecordsDigest writes every record through one buffer; each record's
// bytes must be those of a fresh object, whatever the record before it
// held (a longer one, an error).
func TestRecordsDigestIsEachRecordOnItsOwn(t *testing.T) {
	_, recs := packetFixture()
	recs = append(recs, recs[1], recs[0]) // a long record before a short one, and back
	h := sha256.New()
	for _, r := range recs {
		b, err := newObject("record").int("ord", int64(r.Ord)).str("subject_kind", r.SubjectKind).
			str("subject_project", r.SubjectProject).str("subject_key", r.SubjectKey).
			int("subject_version", int64(r.SubjectVersion)).str("decision", r.Decision).str("section", r.Section).
			int("position", int64(r.Position)).optInt("span_start", r.SpanStart).optInt("span_end", r.SpanEnd).
			int("tokens", int64(r.Tokens)).int("rank", int64(r.Rank)).str("rule", r.Rule).str("reason", r.Reason).
			str("detail", r.Detail).str("layer", r.Layer).bool("admin_only", r.AdminOnly).bytes()
		require.NoError(t, err)
		h.Write(b)
		h.Write([]byte{'\n'})
	}
	got, err := RecordsDigest(recs)
	require.NoError(t, err)
	require.Equal(t, h.Sum(nil), got)

	var o object
	o.json("bad", []byte("{")) // an error left on the object
	require.Error(t, o.err)
	b, err := o.reset("record").str("k", "v").bytes()
	require.NoError(t, err, "reset clears an earlier error")
	require.Equal(t, `{"entry":"record","k":"v"}`, string(b))
}
