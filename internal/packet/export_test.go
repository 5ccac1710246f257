package packet

import (
	"context"

	"github.com/contextd/contextd/internal/assemble"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/ident"
	"github.com/contextd/contextd/internal/store"
)

// PrepareFirstPipeline assembles a packet the way contextd did before
// pipeline 2 (every current version of the snapshot, ts_rank_cd relevance,
// every candidate tried), so tests can store packets made by the old code
// and check they still replay byte for byte.
func (s *Service) PrepareFirstPipeline(ctx context.Context, agent *auth.Agent, proj string, req *ctxtype.Request) (*Packet, error) {
	if err := req.Normalize(); err != nil {
		return nil, err
	}
	var point store.ReadPoint
	err := s.store.Snapshot(ctx, func(tx *store.Tx) error {
		var err error
		point, err = tx.PacketReadPoint(ctx)
		return err
	})
	if err != nil {
		return nil, err
	}
	cands, err := s.snapshotCandidates(ctx, proj, &Packet{Request: req, Snapshot: point.Snapshot, CreatedAt: point.Now})
	if err != nil {
		return nil, err
	}
	id := ident.New("ctxpkt")
	res, err := assemble.Assemble(assemble.Input{Project: proj, PacketID: id, Request: req, Candidates: cands, Now: point.Now, Render: assemble.Render1})
	if err != nil {
		return nil, err
	}
	return build(agent, id, proj, req, point, res, nil)
}

// StoreForTest stores a prepared packet in a transaction of its own.
func (s *Service) StoreForTest(ctx context.Context, p *Packet) error {
	return s.store.InTx(ctx, func(tx *store.Tx) error { return s.StoreTx(ctx, tx, p) })
}
