package server

import (
	"context"
	"encoding/hex"
	"errors"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/evidence"
)

// ListAuditEntries implements api.StrictServerInterface.
func (s *Server) ListAuditEntries(ctx context.Context, r api.ListAuditEntriesRequestObject) (api.ListAuditEntriesResponseObject, error) {
	limit, err := pageLimit(r.Params.Limit)
	if err != nil {
		return nil, err
	}
	p, err := s.evidence.Entries(ctx, agentFrom(ctx), r.Project, deref(r.Params.After), limit)
	if err != nil {
		return nil, err
	}
	out := api.ListAuditEntries200JSONResponse{Data: []api.AuditEntry{}, Head: api.AuditHead{Seq: p.HeadSeq, Hash: audit.HexHead(p.HeadHash)}}
	for _, e := range p.Entries {
		out.Data = append(out.Data, api.AuditEntry{Seq: e.Seq, Kind: e.Kind, Subject: e.Subject, Body: e.Body,
			EntryHash: hex.EncodeToString(e.EntryHash), ChainHash: hex.EncodeToString(e.ChainHash)})
	}
	if n := len(p.Entries); n == limit && p.Entries[n-1].Seq < p.HeadSeq {
		next := p.Entries[n-1].Seq
		out.NextAfter = &next
	}
	return out, nil
}

// VerifyAudit implements api.StrictServerInterface.
func (s *Server) VerifyAudit(ctx context.Context, r api.VerifyAuditRequestObject) (api.VerifyAuditResponseObject, error) {
	res, err := s.evidence.Verify(ctx, agentFrom(ctx), r.Project)
	if err != nil {
		return nil, err
	}
	if p := res.Problem; p != nil {
		return api.VerifyAudit200JSONResponse{Ok: false, FirstBadSeq: &p.Seq, Problem: &p.Code, Detail: &p.Detail}, nil
	}
	head := audit.HexHead(res.Head)
	return api.VerifyAudit200JSONResponse{Ok: true, Entries: &res.Entries, Head: &head}, nil
}

// GetAuditCheckpoint implements api.StrictServerInterface.
func (s *Server) GetAuditCheckpoint(ctx context.Context, r api.GetAuditCheckpointRequestObject) (api.GetAuditCheckpointResponseObject, error) {
	c, err := s.evidence.Checkpoint(ctx, agentFrom(ctx), r.Project)
	if errors.Is(err, evidence.ErrNoKey) {
		return nil, problem(503, "audit_key_missing", "no audit key is configured: start the server with --audit-key-file or CONTEXTD_AUDIT_KEY")
	}
	if err != nil {
		return nil, err
	}
	return api.GetAuditCheckpoint200JSONResponse{Project: c.Project, Seq: c.Seq, Head: c.Head, Time: c.Time,
		Signature: c.Signature, PublicKey: c.PublicKey}, nil
}
