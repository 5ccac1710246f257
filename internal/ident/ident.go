// Package ident makes opaque, type-prefixed identifiers (agt_, ctxpkt_,
// hnd_, ...): random base62, so they reveal nothing and never collide in
// practice, and the prefix says what an id names.
package ident

import "crypto/rand"

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// Alphabet is the set of characters Random draws from.
const Alphabet = base62

// Random returns n uniformly random base62 characters.
func Random(n int) string {
	out := make([]byte, 0, n)
	buf := make([]byte, n*2)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			panic(err) // crypto/rand does not fail on supported platforms
		}
		for _, b := range buf {
			if b < 248 { // 248 = 4 × 62: rejection sampling keeps characters uniform
				out = append(out, base62[b%62])
				if len(out) == n {
					break
				}
			}
		}
	}
	return string(out)
}

// New returns prefix + "_" + 20 random base62 characters (≈119 bits).
func New(prefix string) string { return prefix + "_" + Random(20) }
