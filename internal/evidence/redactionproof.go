package evidence

import (
	"context"
	"errors"
	"fmt"

	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/store"
)

// proveRedactedPackets checks every packet whose entry a redaction
// replaced against what only a real redaction could have done: the
// redaction its entry names has contextd's id form, a row, and its own
// entry in its project's chain whose body is that row; it removed a
// version the packet's records included; and the packet's text holds
// that redaction's marker at each of that version's spans. (The text
// outside the spans is vouched for by the packet's last packet_redaction
// entry, checked with the other current rows.) Any other change of a
// packet's text is content_changed.
func proveRedactedPackets(ctx context.Context, tx *store.Tx, proj string, v *audit.Verifier) (bool, error) {
	proofs := map[string]redactionProof{} // by redaction id: a redaction reaches many packets
	rps := v.RedactedPackets()
	for len(rps) > 0 {
		page := rps[:min(len(rps), verifyPage)]
		rps = rps[len(page):]
		ids := make([]string, len(page))
		for i, rp := range page {
			ids[i] = rp.ID
		}
		texts, err := tx.PacketTexts(ctx, proj, ids)
		if err != nil {
			return false, err
		}
		recs, err := tx.PacketRecordListMany(ctx, proj, ids)
		if err != nil {
			return false, err
		}
		for _, rp := range page {
			text, ok := texts[rp.ID]
			if !ok {
				return v.RedactionUnproven(rp.Seq, fmt.Sprintf("packet %s is redacted by %q, but its row is gone", rp.ID, rp.Redaction)), nil
			}
			why, err := redactionUnproven(ctx, tx, proj, rp, proofs, text, recs[rp.ID])
			if err != nil {
				return false, err
			}
			if why != "" {
				return v.RedactionUnproven(rp.Seq, fmt.Sprintf("packet %s is redacted by %q, but %s", rp.ID, rp.Redaction, why)), nil
			}
		}
	}
	return true, nil
}

// redactionProof is a redaction as its proof found it: the row, or why it
// is not one contextd made.
type redactionProof struct {
	r   store.Redaction
	why string
}

// redactionUnproven says what a redacted packet's proof lacks ("" when
// it holds), given the packet's text and records.
func redactionUnproven(ctx context.Context, tx *store.Tx, proj string, rp audit.RedactedPacket, proofs map[string]redactionProof,
	text string, recs []ctxtype.Record) (string, error) {
	p, ok := proofs[rp.Redaction]
	if !ok {
		var err error
		if p, err = proveRedaction(ctx, tx, proj, rp.Redaction); err != nil {
			return "", err
		}
		proofs[rp.Redaction] = p
	}
	if p.why != "" {
		return p.why, nil
	}
	spans, bad := p.r.MarkersIn(text, recs)
	if spans == 0 && bad == "" {
		bad = fmt.Sprintf("the packet never included %s@%d, which redaction %s removed", p.r.Key, p.r.Version, p.r.ID)
	}
	return bad, nil
}

// proveRedaction finds the redaction id and says why it is not one
// contextd made, if it is not: its id's form, its row, its one entry.
func proveRedaction(ctx context.Context, tx *store.Tx, proj, id string) (redactionProof, error) {
	if !audit.ValidRedactionID(id) {
		return redactionProof{why: "that is not the id of a redaction contextd made"}, nil
	}
	r, err := redactionOf(ctx, tx, proj, id)
	if errors.Is(err, fault.ErrNotFound) {
		return redactionProof{why: "there is no such redaction"}, nil
	}
	if err != nil {
		return redactionProof{}, err
	}
	// nil: the walk checks the seals of every entry.
	why, err := tx.RedactionUnchained(ctx, r, nil)
	return redactionProof{r: r, why: why}, err
}

// redactionOf is the redaction id of proj, or of _shared (whose items
// every project's packets include).
func redactionOf(ctx context.Context, tx *store.Tx, proj, id string) (store.Redaction, error) {
	r, err := tx.RedactionGet(ctx, proj, id)
	if errors.Is(err, fault.ErrNotFound) && proj != sharedProject {
		r, err = tx.RedactionGet(ctx, sharedProject, id)
	}
	return r, err
}
