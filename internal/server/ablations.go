package server

import (
	"context"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/packet"
	"github.com/contextd/contextd/internal/store"
)

// AblatePacket implements api.StrictServerInterface: a counterfactual
// packet, assembled (reading the original's snapshot) before the write
// transaction begins, as AssemblePacket does, then stored in it.
func (s *Server) AblatePacket(ctx context.Context, r api.AblatePacketRequestObject) (api.AblatePacketResponseObject, error) {
	body, err := requireBody(r.Body)
	if err != nil {
		return nil, err
	}
	without := make([]packet.Without, len(body.Without))
	for i, w := range body.Without {
		without[i] = packet.Without{Key: deref(w.Key), Layer: deref(w.Layer), Request: deref(w.Request), Handoff: deref(w.Handoff)}
	}
	p, err := s.packets.PrepareAblation(ctx, agentFrom(ctx), r.Project, r.Id, without)
	if err != nil {
		return nil, err
	}
	if err := s.write(ctx, func(tx *store.Tx) error { return s.packets.StoreTx(ctx, tx, p) }); err != nil {
		return nil, err
	}
	return api.AblatePacket201JSONResponse(toPacket(s.packets.ForViewer(agentFrom(ctx), p))), nil
}
