package server

import (
	"context"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/outcome"
)

// GetSuspects implements api.StrictServerInterface.
func (s *Server) GetSuspects(ctx context.Context, r api.GetSuspectsRequestObject) (api.GetSuspectsResponseObject, error) {
	sus, err := s.outcomes.Suspects(ctx, agentFrom(ctx), r.Project, r.Id)
	if err != nil {
		return nil, err
	}
	out := api.GetSuspects200JSONResponse{PacketId: r.Id, Suspects: make([]api.Suspect, len(sus))}
	for i, su := range sus {
		out.Suspects[i] = toSuspect(su)
	}
	return out, nil
}

func toSuspect(su outcome.Suspect) api.Suspect {
	out := api.Suspect{Subject: su.Kind, Project: ptrIf(su.Project), Key: su.Key, Version: ptrIf(su.Version), Score: su.Score,
		Confidence: su.Confidence, Evidence: make([]api.SuspectEvidence, len(su.Evidence))}
	for i, ev := range su.Evidence {
		e := api.SuspectEvidence{Kind: ev.Kind}
		switch ev.Kind {
		case outcome.EvidenceUsed:
			e.Similarity, e.OutcomeId = &ev.Similarity, &ev.OutcomeID
		case outcome.EvidenceContrast:
			e.Scope, e.Contrast = &ev.Scope, &ev.Contrast
			e.FailuresWith, e.SuccessesWith = &ev.FailuresWith, &ev.SuccessesWith
			e.FailuresWithout, e.SuccessesWithout = &ev.FailuresWithout, &ev.SuccessesWithout
		case outcome.EvidenceChanged:
			e.SincePacket, e.PreviousVersion = &ev.SincePacket, ptrIf(ev.PreviousVersion)
		case outcome.EvidenceAblation:
			e.PacketId = &ev.PacketID
		}
		out.Evidence[i] = e
	}
	return out
}
