package audit

import (
	"strconv"
	"time"
)

// KindOutcome is an outcome of a packet (how its answer went, issue 36).
// Outcomes are append-only: a body is checked against its row.
const KindOutcome = "outcome"

// OutcomeRow is an outcome as stored.
type OutcomeRow struct {
	Project, ID, PacketID string
	Seq                   int
	CreatedAt             time.Time
	CreatedBy             string
	Status, Source        string
	Score                 *float64
	Label, Note           string
	Answer                *string
	AnswerSHA256          []byte
	Used                  []byte // JSON array
}

// OutcomeBody is an outcome's entry body: its columns in OutcomeRow's
// order, the answer as its SHA-256 ("answer_sha256_of", null without an
// answer) next to the stored "answer_sha256", as a packet's text is.
func OutcomeBody(r OutcomeRow) ([]byte, error) {
	o := newObject(KindOutcome).str("project", r.Project).str("id", r.ID).str("packet_id", r.PacketID).
		int("seq", int64(r.Seq)).time("created_at", &r.CreatedAt).str("created_by", r.CreatedBy).
		str("status", r.Status).str("source", r.Source)
	if r.Score == nil {
		o.raw("score", []byte("null"))
	} else {
		o.raw("score", []byte(strconv.FormatFloat(*r.Score, 'g', -1, 64)))
	}
	o.str("label", r.Label).str("note", r.Note)
	if r.Answer == nil {
		o.raw("answer_sha256_of", []byte("null"))
	} else {
		o.sha("answer_sha256_of", *r.Answer)
	}
	if r.AnswerSHA256 == nil {
		o.raw("answer_sha256", []byte("null"))
	} else {
		o.hex("answer_sha256", r.AnswerSHA256)
	}
	return o.json("used", r.Used).bytes()
}
