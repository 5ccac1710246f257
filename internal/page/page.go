// Package page encodes the opaque cursors of paged listings. A cursor is
// the position after the last row of a page (a key, a time and id, a rank
// and key), as JSON in URL-safe base64: opaque to clients, and checked on
// the way back in so a forged or truncated one is a clear 422.
package page

import (
	"encoding/base64"
	"encoding/json"

	"github.com/contextd/contextd/internal/validation"
)

// Encode returns the cursor for position v.
func Encode(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // positions are plain structs of this module
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode reads cursor s into v; an empty s leaves v alone and reports false.
func Decode(s string, v any) (bool, error) {
	if s == "" {
		return false, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		err = json.Unmarshal(b, v)
	}
	if err != nil {
		return false, validation.One("cursor", "format", "cursor is not one this server gave out")
	}
	return true, nil
}
