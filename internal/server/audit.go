package server

import (
	"context"
	"encoding/hex"
	"errors"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/evidence"
	"github.com/contextd/contextd/internal/store"
)

// ListAuditEntries implements api.StrictServerInterface.
func (s *Server) ListAuditEntries(ctx context.Context, r api.ListAuditEntriesRequestObject) (api.ListAuditEntriesResponseObject, error) {
	limit, err := pageLimit(r.Params.Limit)
	if err != nil {
		return nil, err
	}
	out, err := s.auditEntries(ctx, r.Project, deref(r.Params.After), limit)
	return api.ListAuditEntries200JSONResponse(out), err
}

// ListGlobalAuditEntries implements api.StrictServerInterface.
func (s *Server) ListGlobalAuditEntries(ctx context.Context, r api.ListGlobalAuditEntriesRequestObject) (api.ListGlobalAuditEntriesResponseObject, error) {
	limit, err := pageLimit(r.Params.Limit)
	if err != nil {
		return nil, err
	}
	out, err := s.auditEntries(ctx, audit.GlobalChain, deref(r.Params.After), limit)
	return api.ListGlobalAuditEntries200JSONResponse(out), err
}

func (s *Server) auditEntries(ctx context.Context, chain string, after int64, limit int) (api.AuditEntryList, error) {
	p, err := s.evidence.Entries(ctx, agentFrom(ctx), chain, after, limit)
	if err != nil {
		return api.AuditEntryList{}, err
	}
	out := api.AuditEntryList{Data: []api.AuditEntry{}, Head: api.AuditHead{Seq: p.HeadSeq, Hash: audit.HexHead(p.HeadHash)}}
	for _, e := range p.Entries {
		ae := api.AuditEntry{Seq: e.Seq, Kind: e.Kind, Subject: e.Subject, Body: e.Body,
			EntryHash: hex.EncodeToString(e.EntryHash), ChainHash: hex.EncodeToString(e.ChainHash)}
		if e.Seal != nil {
			ae.Seal = &api.AuditSeal{FirstSeq: e.Seal.First, Kind: api.AuditSealKind(e.Seal.Kind), Signature: e.Seal.Signature}
		}
		out.Data = append(out.Data, ae)
	}
	if n := len(p.Entries); n > 0 && p.More {
		next := p.Entries[n-1].Seq
		out.NextAfter = &next
	}
	return out, nil
}

// VerifyAudit implements api.StrictServerInterface.
func (s *Server) VerifyAudit(ctx context.Context, r api.VerifyAuditRequestObject) (api.VerifyAuditResponseObject, error) {
	out, err := s.auditVerify(ctx, r.Project)
	return api.VerifyAudit200JSONResponse(out), err
}

// VerifyGlobalAudit implements api.StrictServerInterface.
func (s *Server) VerifyGlobalAudit(ctx context.Context, _ api.VerifyGlobalAuditRequestObject) (api.VerifyGlobalAuditResponseObject, error) {
	out, err := s.auditVerify(ctx, audit.GlobalChain)
	return api.VerifyGlobalAudit200JSONResponse(out), err
}

func (s *Server) auditVerify(ctx context.Context, chain string) (api.AuditVerification, error) {
	res, err := s.evidence.Verify(ctx, agentFrom(ctx), chain)
	if err != nil {
		return api.AuditVerification{}, err
	}
	if p := res.Problem; p != nil {
		return api.AuditVerification{Ok: false, FirstBadSeq: &p.Seq, Problem: &p.Code, Detail: &p.Detail}, nil
	}
	head := audit.HexHead(res.Head)
	out := api.AuditVerification{Ok: true, Entries: &res.Entries, Head: &head, Redacted: &res.Redacted, Sealed: &res.Sealed}
	if res.Adopted > 0 {
		out.AdoptedThrough = &res.Adopted
	}
	return out, nil
}

// GetAuditCheckpoint implements api.StrictServerInterface.
func (s *Server) GetAuditCheckpoint(ctx context.Context, r api.GetAuditCheckpointRequestObject) (api.GetAuditCheckpointResponseObject, error) {
	out, err := s.auditCheckpoint(ctx, r.Project)
	return api.GetAuditCheckpoint200JSONResponse(out), err
}

// GetGlobalAuditCheckpoint implements api.StrictServerInterface.
func (s *Server) GetGlobalAuditCheckpoint(ctx context.Context, _ api.GetGlobalAuditCheckpointRequestObject) (api.GetGlobalAuditCheckpointResponseObject, error) {
	out, err := s.auditCheckpoint(ctx, audit.GlobalChain)
	return api.GetGlobalAuditCheckpoint200JSONResponse(out), err
}

func (s *Server) auditCheckpoint(ctx context.Context, chain string) (api.AuditCheckpoint, error) {
	c, err := s.evidence.Checkpoint(ctx, agentFrom(ctx), chain)
	if errors.Is(err, evidence.ErrNoKey) {
		return api.AuditCheckpoint{}, problem(503, "audit_key_missing", "no audit key is configured: start the server with --audit-key-file or CONTEXTD_AUDIT_KEY")
	}
	if err != nil {
		return api.AuditCheckpoint{}, err
	}
	return api.AuditCheckpoint{Project: c.Project, Seq: c.Seq, Head: c.Head, Time: c.Time, Signature: c.Signature, PublicKey: c.PublicKey}, nil
}

// RedactItemVersion implements api.StrictServerInterface.
func (s *Server) RedactItemVersion(ctx context.Context, r api.RedactItemVersionRequestObject) (api.RedactItemVersionResponseObject, error) {
	body, err := requireBody(r.Body)
	if err != nil {
		return nil, err
	}
	red, err := s.evidence.Redact(ctx, agentFrom(ctx), r.Project, r.Key, int(r.Version), body.Reason)
	if err != nil {
		return nil, err
	}
	return api.RedactItemVersion202JSONResponse(toRedaction(red)), nil
}

// GetRedaction implements api.StrictServerInterface.
func (s *Server) GetRedaction(ctx context.Context, r api.GetRedactionRequestObject) (api.GetRedactionResponseObject, error) {
	red, err := s.evidence.Redaction(ctx, agentFrom(ctx), r.Project, r.Id)
	if err != nil {
		return nil, err
	}
	return api.GetRedaction200JSONResponse(toRedaction(red)), nil
}

func toRedaction(r store.Redaction) api.Redaction {
	out := api.Redaction{Id: r.ID, Status: api.RedactionStatus(r.Status), PacketsDone: r.PacketsDone, PacketsTotal: r.PacketsTotal,
		Key: &r.Key, Version: &r.Version, Reason: &r.Reason, CreatedBy: &r.CreatedBy, CreatedAt: &r.CreatedAt}
	if r.Error != "" {
		out.Error = &r.Error
	}
	return out
}
