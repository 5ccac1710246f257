package ctxtype

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// KeyFor is the item key for an identifier another system gave (a KXM
// ContextItem's id, a navi ContextPacket's id): the identifier itself when
// it is a valid key; otherwise every code point outside the key alphabet
// becomes "_", cut at 183 bytes, followed by "_" and the first 16 hex
// digits of the identifier's SHA-256, so that two identifiers that differ
// only in characters the alphabet lacks never name the same item. An empty
// id gives "" (the caller derives a key or refuses). The mapping is
// deterministic, so importing the same identifier twice names the same item.
func KeyFor(id string) string {
	if id == "" || ValidKey(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	suffix := "_" + hex.EncodeToString(sum[:])[:16]
	var b strings.Builder
	for _, r := range id {
		if r < 0x80 && (r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || strings.ContainsRune("._:-", r)) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	fitted := b.String()
	if len(fitted) > 200-len(suffix) {
		fitted = fitted[:200-len(suffix)]
	}
	return fitted + suffix
}
