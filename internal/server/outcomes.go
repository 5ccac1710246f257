package server

import (
	"context"
	"encoding/hex"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/outcome"
	"github.com/contextd/contextd/internal/store"
)

func toOutcome(o store.Outcome) api.Outcome {
	out := api.Outcome{Id: o.ID, Project: o.Project, PacketId: o.PacketID, Seq: o.Seq, CreatedAt: o.CreatedAt,
		CreatedBy: o.CreatedBy, Status: o.Status, Source: o.Source, Score: o.Score, Label: ptrIf(o.Label),
		Note: ptrIf(o.Note), Answer: o.Answer, Used: make([]api.OutcomeUse, len(o.Used))}
	if o.AnswerSHA256 != nil {
		h := hex.EncodeToString(o.AnswerSHA256)
		out.AnswerSha256 = &h
	}
	for i, u := range o.Used {
		out.Used[i] = api.OutcomeUse{Subject: u.Subject, Key: u.Key, Project: ptrIf(u.Project), Version: ptrIf(u.Version),
			Similarity: u.Similarity, Match: u.Match}
	}
	return out
}

// RecordOutcome implements api.StrictServerInterface. The packet is read
// and the answer attributed before the write transaction, so a request
// never holds two connections.
func (s *Server) RecordOutcome(ctx context.Context, r api.RecordOutcomeRequestObject) (api.RecordOutcomeResponseObject, error) {
	body, err := requireBody(r.Body)
	if err != nil {
		return nil, err
	}
	d, err := s.outcomes.Prepare(ctx, agentFrom(ctx), r.Project, r.Id, outcome.Params{Status: body.Status,
		Source: deref(body.Source), Answer: body.Answer, Score: body.Score, Label: deref(body.Label), Note: deref(body.Note)})
	if err != nil {
		return nil, err
	}
	var o *store.Outcome
	if err := s.write(ctx, func(tx *store.Tx) error {
		var err error
		o, err = s.outcomes.RecordTx(ctx, tx, d)
		return err
	}); err != nil {
		return nil, err
	}
	return api.RecordOutcome201JSONResponse(toOutcome(*o)), nil
}

// ListOutcomes implements api.StrictServerInterface.
func (s *Server) ListOutcomes(ctx context.Context, r api.ListOutcomesRequestObject) (api.ListOutcomesResponseObject, error) {
	limit, err := pageLimit(r.Params.Limit)
	if err != nil {
		return nil, err
	}
	os, next, err := s.outcomes.List(ctx, agentFrom(ctx), r.Project, r.Id, deref(r.Params.Cursor), limit)
	if err != nil {
		return nil, err
	}
	out := api.ListOutcomes200JSONResponse{Data: make([]api.Outcome, len(os)), NextCursor: ptrIf(next)}
	for i, o := range os {
		out.Data[i] = toOutcome(o)
	}
	return out, nil
}

// packetOutcomes is the outcomes member of a packet's GET answer: the
// newest of each source, without the answer's text (which the list has),
// so that the answer stays bounded by the packet's own text; nil when
// there are none.
func packetOutcomes(os []store.Outcome) *[]api.Outcome {
	if len(os) == 0 {
		return nil
	}
	out := make([]api.Outcome, len(os))
	for i, o := range os {
		out[i] = toOutcome(o)
		out[i].Answer = nil
	}
	return &out
}
