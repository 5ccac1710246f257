package auth

import (
	"crypto/sha256"
	"hash/crc32"
	"strings"

	"github.com/contextd/contextd/internal/ident"
)

// KeyPrefix starts every API key, so that a leaked key is recognisable by
// secret scanners and a wrong string is refused without a database lookup.
const KeyPrefix = "ctxd_"

const (
	base62      = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	keyBodyLen  = 32 // 32 base62 characters ≈ 190 bits of entropy
	keyCheckLen = 6  // base62 of the body's CRC-32
	keyTotalLen = len(KeyPrefix) + keyBodyLen + keyCheckLen
	idRandomLen = 20
)

func checksum(body string) string {
	c := crc32.ChecksumIEEE([]byte(body))
	out := make([]byte, keyCheckLen)
	for i := keyCheckLen - 1; i >= 0; i-- {
		out[i] = base62[c%62]
		c /= 62
	}
	return string(out)
}

// NewKey returns a fresh API key. It is shown once; only its hash is kept.
func NewKey() string {
	body := ident.Random(keyBodyLen)
	return KeyPrefix + body + checksum(body)
}

// WellFormed reports whether key has contextd's shape and a valid checksum.
func WellFormed(key string) bool {
	if len(key) != keyTotalLen || !strings.HasPrefix(key, KeyPrefix) {
		return false
	}
	body := key[len(KeyPrefix) : len(KeyPrefix)+keyBodyLen]
	for i := 0; i < len(body); i++ {
		if strings.IndexByte(base62, body[i]) < 0 {
			return false
		}
	}
	return checksum(body) == key[len(KeyPrefix)+keyBodyLen:]
}

// HashKey is what the database stores for a key.
func HashKey(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// NewAgentID returns an opaque agent id (agt_...).
func NewAgentID() string { return ident.New("agt") }
