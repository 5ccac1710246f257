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
	"time"

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
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || strict(b, &c) != nil || len(c.At) == 0 {
		return false, notGivenOut()
	}
	if c.Of != listingID(listing) {
		return false, validation.One("cursor", "format", "cursor is not one this listing gave out (it is of another listing, item or project)")
	}
	if strict(c.At, v) != nil {
		return false, notGivenOut()
	}
	return true, nil
}

// notGivenOut is the problem of a cursor not of this server's form.
func notGivenOut() error {
	return validation.One("cursor", "format", "cursor is not one this server gave out")
}

// strict decodes the JSON b into v, refusing unknown members.
func strict(b []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	return d.Decode(v)
}

// After is the position of a listing by one name (an agent's id, a
// project's name): the last one shown.
type After struct {
	After string `json:"a"`
}

// DecodeAfter is the name an After cursor of listing stands after, ""
// for no cursor.
func DecodeAfter(s, listing string) (string, error) {
	var c After
	_, err := Decode(s, listing, &c)
	return c.After, err
}

// At is the position of a listing by time, newest first, then id (packets,
// handoffs, injections): the last row shown.
type At struct {
	T  time.Time `json:"t"`
	ID string    `json:"id"`
}

// DecodeAt is an At cursor of listing, nil for no cursor; one without its
// time or id is refused, since no page ends there.
func DecodeAt(s, listing string) (*At, error) {
	var c At
	if ok, err := Decode(s, listing, &c); !ok || err != nil {
		return nil, err
	}
	if c.T.IsZero() || c.ID == "" {
		return nil, notGivenOut()
	}
	return &c, nil
}
