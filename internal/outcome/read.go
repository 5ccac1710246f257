package outcome

import (
	"context"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/packet"
	"github.com/contextd/contextd/internal/page"
	"github.com/contextd/contextd/internal/store"
)

// listing is the cursor listing of a packet's outcomes.
func listing(proj, packetID string) string { return page.Listing("outcomes", proj, packetID) }

// List is a page of a packet's outcomes, oldest first, as the agent may
// see them, and the cursor of the next page ("" at the end). Outcomes
// never change, so they are read from history (store.Read).
func (s *Service) List(ctx context.Context, agent *auth.Agent, proj, packetID, cursor string, limit int) ([]store.Outcome, string, error) {
	var after int
	if _, err := page.Decode(cursor, listing(proj, packetID), &after); err != nil {
		return nil, "", err
	}
	pk, err := s.packets.Get(ctx, agent, proj, packetID)
	if err != nil {
		return nil, "", err
	}
	var out []store.Outcome
	err = s.store.Read(ctx, func(db store.DB) error {
		var err error
		out, err = db.OutcomeList(ctx, proj, packetID, after, limit+1)
		return err
	})
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > limit {
		out = out[:limit]
		next = page.Encode(listing(proj, packetID), out[limit-1].Seq)
	}
	for i := range out {
		out[i].Used = shownUses(out[i].Used, pk.Records)
	}
	return out, next, nil
}

// Latest is the newest outcome of each source of a packet the agent has
// opened (pk, as packet.Service.Get answered it), by source name, as the
// agent may see them.
func (s *Service) Latest(ctx context.Context, pk *packet.Packet) ([]store.Outcome, error) {
	var out []store.Outcome
	err := s.store.Read(ctx, func(db store.DB) error {
		var err error
		out, err = db.OutcomeLatestBySource(ctx, pk.Project, pk.ID)
		return err
	})
	if err != nil {
		return nil, err
	}
	for i := range out {
		out[i].Used = shownUses(out[i].Used, pk.Records)
	}
	return out, nil
}
