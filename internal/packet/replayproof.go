package packet

import (
	"context"

	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/store"
)

// redactionsProven reports whether the redactions of versions the packet
// included (reds) are what changed its stored text: each is a redaction
// contextd recorded (its id of contextd's form, its row the body of its
// one chain entry), the stored text holds its marker at every span of the
// version it removed, and the text is the one the packet's last
// packet_redaction entry vouches for, both entries within the head and,
// on a deployment with an audit key, sealed by it (the server's login can
// append entries, not seal them). A replay says redacted only then: a
// text changed any other way is not one a redaction explains.
func (s *Service) redactionsProven(ctx context.Context, p *Packet, reds []store.Redaction) (bool, error) {
	for _, r := range reds {
		if _, bad := r.MarkersIn(p.Rendered, p.Records); !audit.ValidRedactionID(r.ID) || bad != "" {
			return false, nil
		}
		why, err := s.store.RedactionUnchained(ctx, r, s.sealCheck)
		if err != nil || why != "" {
			return false, err
		}
	}
	why, err := s.store.PacketTextUnproven(ctx, p.Project, p.ID, p.Rendered, s.sealCheck)
	return why == "" && err == nil, err
}

// ProveWith makes replays require the seals of the audit key that check
// verifies (evidence.SealCheck of the deployment's public key) on the
// entries that prove a redaction: call it once, before serving.
func (s *Service) ProveWith(check audit.SealCheck) { s.sealCheck = check }
