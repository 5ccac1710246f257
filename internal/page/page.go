// Package page encodes the opaque cursors of paged listings. A cursor is
// the position after the last row of a page (a key, a time and id, a rank
// and key) and the listing it belongs to, as JSON in URL-safe base64:
// opaque to clients, and checked on the way back in, so a forged or
// truncated cursor, or one another listing gave out, is a clear 422 rather
// than a position read in the wrong listing (which would answer some other
// page, or an empty one, as if it were right).
package page

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"hash/fnv"
	"strconv"

	"github.com/contextd/contextd/internal/validation"
)

// Listing names one listing: the parts that fix which rows it pages
// through and in what order (the route, its project and key, a search
// query), joined without ambiguity.
func Listing(parts ...string) string {
	var b []byte
	for _, p := range parts {
		b = strconv.AppendQuote(b, p)
	}
	return string(b)
}

// cursor is the wire form: the listing as a short hash (the cursor stays
// short whatever the listing's parts) and the position.
type cursor struct {
	Of string          `json:"of"`
	At json.RawMessage `json:"at"`
}

func listingID(listing string) string {
	h := fnv.New64a()
	h.Write([]byte(listing))
	return strconv.FormatUint(h.Sum64(), 36)
}

// Encode returns the cursor for position v of listing.
func Encode(listing string, v any) string {
	at, err := json.Marshal(v)
	if err != nil {
		panic(err) // positions are plain structs of this module
	}
	b, err := json.Marshal(cursor{Of: listingID(listing), At: at})
	if err != nil {
		panic(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode reads cursor s of listing into v; an empty s leaves v alone and
// reports false. A cursor this server did not give out, or gave out for
// another listing, is a 422 on the parameter cursor.
func Decode(s, listing string, v any) (bool, error) {
	if s == "" {
		return false, nil
	}
	var c cursor
	if err := strict(s, &c); err != nil || len(c.At) == 0 {
		return false, validation.One("cursor", "format", "cursor is not one this server gave out")
	}
	if c.Of != listingID(listing) {
		return false, validation.One("cursor", "format", "cursor is not one this listing gave out (it is of another listing, item or project)")
	}
	d := json.NewDecoder(bytes.NewReader(c.At))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return false, validation.One("cursor", "format", "cursor is not one this server gave out")
	}
	return true, nil
}

// strict decodes the base64 JSON of s into c, refusing unknown members.
func strict(s string, c *cursor) error {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return err
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(c)
}
