package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/store/internal/dbsqlc"
)

// Outcome is how a packet's answer went: one row of packet_outcomes
// (migration 00031), append-only.
type Outcome struct {
	Project, ID, PacketID string
	// Seq numbers the packet's outcomes from 1, in the order written.
	Seq            int
	CreatedAt      time.Time
	CreatedBy      string
	Status, Source string
	Score          *float64
	Label, Note    string
	Answer         *string
	AnswerSHA256   []byte
	// Used are the packet's included entries the answer quoted or
	// paraphrased, in record order; every one, hidden items included.
	Used []OutcomeUse
}

// OutcomeUse is one included entry of a packet that an outcome's answer
// used, with how it was found (attribute.Exact, Normalized or Passage) and
// its similarity. Project and Version are set for items only.
type OutcomeUse struct {
	Subject    string  `json:"subject"`
	Project    string  `json:"project,omitempty"`
	Key        string  `json:"key"`
	Version    int     `json:"version,omitempty"`
	Similarity float64 `json:"similarity"`
	Match      string  `json:"match"`
}

func outcomeOf(r dbsqlc.PacketOutcome) (Outcome, error) {
	o := Outcome{Project: r.Project, ID: r.ID, PacketID: r.PacketID, Seq: int(r.Seq), CreatedAt: r.CreatedAt.UTC(),
		CreatedBy: r.CreatedBy, Status: r.Status, Source: r.Source, Score: r.Score, Label: r.Label, Note: r.Note,
		Answer: r.Answer, AnswerSHA256: r.AnswerSha256, Used: []OutcomeUse{}}
	if err := json.Unmarshal(r.Used, &o.Used); err != nil {
		return Outcome{}, fmt.Errorf("decode outcome %s used: %w", r.ID, err)
	}
	return o, nil
}

func outcomesOf(rows []dbsqlc.PacketOutcome) ([]Outcome, error) {
	out := make([]Outcome, len(rows))
	for i, r := range rows {
		var err error
		if out[i], err = outcomeOf(r); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func outcomeRow(r dbsqlc.PacketOutcome) audit.OutcomeRow {
	return audit.OutcomeRow{Project: r.Project, ID: r.ID, PacketID: r.PacketID, Seq: int(r.Seq), CreatedAt: r.CreatedAt,
		CreatedBy: r.CreatedBy, Status: r.Status, Source: r.Source, Score: r.Score, Label: r.Label, Note: r.Note,
		Answer: r.Answer, AnswerSHA256: r.AnswerSha256, Used: r.Used}
}

// OutcomeLockPacket serialises the outcome writes of one packet until tx
// ends, so that OutcomeCount counts every outcome committed before. The
// lock waits for the transaction's next statement (OutcomeCount's) and
// goes in its round trip: a statement of its own after the lock's, so
// under read committed the count's snapshot is still taken once the lock
// is held.
func (tx *Tx) OutcomeLockPacket(ctx context.Context, project, packetID string) error {
	return interpret(tx.waitForNext(ctx, func() error {
		return q.OutcomeLockPacket(ctx, tx.ex, dbsqlc.OutcomeLockPacketParams{Project: project, PacketID: packetID})
	}))
}

// OutcomeCount is how many outcomes a packet has.
func (db DB) OutcomeCount(ctx context.Context, project, packetID string) (int, error) {
	n, err := q.OutcomeCount(ctx, db.ex, dbsqlc.OutcomeCountParams{Project: project, PacketID: packetID})
	return int(n), interpret(err)
}

// OutcomeInsert stores an outcome (its Seq given by the caller, its time
// the database's) with its audit entry, and returns it as stored.
func (tx *Tx) OutcomeInsert(ctx context.Context, o Outcome) (Outcome, error) {
	used := o.Used
	if used == nil {
		used = []OutcomeUse{}
	}
	ub, err := json.Marshal(used)
	if err != nil {
		return Outcome{}, err
	}
	row, err := q.OutcomeInsert(ctx, tx.ex, dbsqlc.OutcomeInsertParams{Project: o.Project, ID: o.ID, PacketID: o.PacketID,
		Seq: int32(o.Seq), CreatedBy: o.CreatedBy, Status: o.Status, Source: o.Source, Score: o.Score, Label: o.Label,
		Note: o.Note, Answer: o.Answer, AnswerSha256: o.AnswerSHA256, Used: ub})
	if err != nil {
		return Outcome{}, interpret(err)
	}
	body, err := audit.OutcomeBody(outcomeRow(row))
	if err := tx.entry(o.Project, audit.KindOutcome, o.ID, body, err); err != nil {
		return Outcome{}, err
	}
	return outcomeOf(row)
}

// OutcomeList is a page of a packet's outcomes, oldest first, after seq.
func (db DB) OutcomeList(ctx context.Context, project, packetID string, afterSeq, limit int) ([]Outcome, error) {
	rows, err := q.OutcomeListByPacket(ctx, db.ex, dbsqlc.OutcomeListByPacketParams{Project: project, PacketID: packetID,
		AfterSeq: int32(afterSeq), Lim: int32(limit)})
	if err != nil {
		return nil, interpret(err)
	}
	return outcomesOf(rows)
}

// OutcomeLatestBySource is the newest outcome of each source of a packet,
// by source name.
func (db DB) OutcomeLatestBySource(ctx context.Context, project, packetID string) ([]Outcome, error) {
	rows, err := q.OutcomeLatestBySource(ctx, db.ex, dbsqlc.OutcomeLatestBySourceParams{Project: project, PacketID: packetID})
	if err != nil {
		return nil, interpret(err)
	}
	return outcomesOf(rows)
}

// OutcomeIDs is a page of a project's outcome ids, in id order, for the
// audit's check that every outcome has its entry.
func (db DB) OutcomeIDs(ctx context.Context, project, afterID string, limit int) ([]string, error) {
	ids, err := q.OutcomeIDPage(ctx, db.ex, dbsqlc.OutcomeIDPageParams{Project: project, AfterID: afterID, Lim: int32(limit)})
	return ids, interpret(err)
}

// OutcomeBodies recomputes the entry bodies of outcomes from their rows,
// by id.
func (db DB) OutcomeBodies(ctx context.Context, project string, ids []string) (map[string][]byte, error) {
	out := map[string][]byte{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := q.OutcomeGetMany(ctx, db.ex, dbsqlc.OutcomeGetManyParams{Project: project, Ids: ids})
	if err != nil {
		return nil, interpret(err)
	}
	for _, r := range rows {
		out[r.ID] = bodyOrMark(audit.OutcomeBody(outcomeRow(r)))
	}
	return out, nil
}
