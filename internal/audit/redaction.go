package audit

import (
	"bytes"
	"regexp"
)

// redactionID is the one form of a redaction's id: what ident.New("red")
// makes, and what the redactions table's CHECK enforces (migration 00027).
// A packet's redaction marker is built from the id, so the id is the only
// text a redaction writes into a packet, and it can say nothing.
var redactionID = regexp.MustCompile(`^red_[0-9A-Za-z]{20}$`)

// ValidRedactionID reports whether id has the form contextd gives a
// redaction's id.
func ValidRedactionID(id string) bool { return redactionID.MatchString(id) }

// RedactionMarker is what a redaction writes over a span of n bytes of a
// packet's text: "[redacted ID]" cut or padded with '-' to n bytes, so
// every span of every record stays valid (contextd_redact_packet writes
// the same bytes).
func RedactionMarker(id string, n int) []byte {
	if n <= 0 {
		return nil
	}
	m := append([]byte("[redacted "+id+"]"), bytes.Repeat([]byte("-"), n)...)
	return m[:n]
}

// RedactedPacket is a packet whose entry a redaction replaced: the
// redaction its entry names, and the entry's seq.
type RedactedPacket struct {
	ID, Redaction string
	Seq           int64
}

// RedactedPackets are the packets whose entries were found redacted, in
// seq order: what the rows must then prove (the redaction is real, it
// removed a version the packet included, and the text holds its marker
// there).
func (v *Verifier) RedactedPackets() []RedactedPacket { return v.redactedPackets }

// RedactionUnproven reports a redacted packet whose change no real
// redaction explains: its text was changed some other way.
func (v *Verifier) RedactionUnproven(seq int64, detail string) bool {
	return v.fail(seq, ContentChanged, "%s", detail)
}
