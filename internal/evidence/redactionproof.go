package evidence

import (
	"bytes"
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
	for _, rp := range v.RedactedPackets() {
		why, err := redactionUnproven(ctx, tx, proj, rp)
		if err != nil {
			return false, err
		}
		if why != "" {
			return v.RedactionUnproven(rp.Seq, fmt.Sprintf("packet %s is redacted by %q, but %s", rp.ID, rp.Redaction, why)), nil
		}
	}
	return true, nil
}

// redactionUnproven says what a redacted packet's proof lacks ("" when
// it holds).
func redactionUnproven(ctx context.Context, tx *store.Tx, proj string, rp audit.RedactedPacket) (string, error) {
	if !audit.ValidRedactionID(rp.Redaction) {
		return "that is not the id of a redaction contextd made", nil
	}
	r, err := redactionOf(ctx, tx, proj, rp.Redaction)
	if errors.Is(err, fault.ErrNotFound) {
		return "there is no such redaction", nil
	}
	if err != nil {
		return "", err
	}
	// nil: the walk checks the seals of every entry.
	if why, err := tx.RedactionUnchained(ctx, r, nil); why != "" || err != nil {
		return why, err
	}
	p, err := tx.PacketGet(ctx, proj, rp.ID)
	if err != nil {
		return "", err
	}
	recs, err := tx.PacketRecordList(ctx, proj, rp.ID)
	if err != nil {
		return "", err
	}
	return markersHeld([]byte(p.Rendered), recs, r), nil
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

// markersHeld says whether text holds r's marker at every span of the
// version r removed, which the records must include.
func markersHeld(text []byte, recs []ctxtype.Record, r store.Redaction) string {
	spans := 0
	for _, rec := range recs {
		if rec.SubjectKind != ctxtype.SubjectItem || rec.Decision != "included" || rec.Span == nil ||
			rec.SubjectProject != r.Project || rec.SubjectKey != r.Key || rec.SubjectVersion != r.Version {
			continue
		}
		spans++
		s, e := rec.Span.Start, rec.Span.End
		if s < 0 || e > len(text) || s > e || !bytes.Equal(text[s:e], audit.RedactionMarker(r.ID, e-s)) {
			return fmt.Sprintf("its text at [%d,%d) is not the marker of redaction %s", s, e, r.ID)
		}
	}
	if spans == 0 {
		return fmt.Sprintf("the packet never included %s@%d, which redaction %s removed", r.Key, r.Version, r.ID)
	}
	return ""
}
