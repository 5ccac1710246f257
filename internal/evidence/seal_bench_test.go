package evidence

import (
	"encoding/base64"
	"testing"

	"github.com/contextd/contextd/internal/audit"
)

// BenchmarkSeal is what sealing adds to a write transaction in Go: one
// signature over its chain's new head.
func BenchmarkSeal(b *testing.B) {
	k, err := ParseKey(base64.StdEncoding.EncodeToString(make([]byte, 32)))
	if err != nil {
		b.Fatal(err)
	}
	head := audit.Hash([]byte("head"))
	for b.Loop() {
		k.Seal(audit.SealMessage(audit.SealWrite, "acme", 41, 42, head))
	}
}
