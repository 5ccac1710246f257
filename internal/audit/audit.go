// Package audit is contextd's evidence: an append-only hash chain per
// project over what changes it, and its verification. It is pure: the
// store writes and reads the rows, this package says what their entries
// are and whether a chain and the rows it covers still agree.
//
// An entry is (seq, kind, subject, body): body is the canonical encoding
// of what the entry covers (ItemVersionBody), its entry hash SHA-256(body),
// and its chain hash SHA-256(previous chain hash || entry hash), where the
// first entry's previous hash is 32 zero bytes. seq is gapless per chain.
// A verifier that recomputes the hashes from the bodies, and each body
// from the row it covers as that row is now, finds any change to a row, to
// an entry or to their order; a checkpoint of the head kept elsewhere also
// finds a chain rewritten whole.
package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Kinds of entries.
const (
	KindItemVersion = "item_version"
)

// Problems a verification reports, with the first bad seq.
const (
	ContentChanged = "content_changed" // a body, or the row it covers, is not what was written
	EntryMissing   = "entry_missing"   // a seq is missing, or a row has no entry
	OrderChanged   = "order_changed"   // an entry is out of its place in the chain
	ExtraEntry     = "extra_entry"     // an entry past the head, or one no write made
	StateMismatch  = "state_mismatch"  // a mutable row disagrees with the entries that changed it
)

// Entry is one link of a chain as stored.
type Entry struct {
	Seq       int64
	Kind      string
	Subject   string
	Body      []byte
	EntryHash []byte
	ChainHash []byte
}

// Genesis is the previous hash of a chain's first entry.
var Genesis = make([]byte, sha256.Size)

// Link is the chain hash of an entry whose body hashes to entryHash after
// the chain hash prev.
func Link(prev, entryHash []byte) []byte {
	h := sha256.New()
	h.Write(prev)
	h.Write(entryHash)
	return h.Sum(nil)
}

// Hash is an entry's hash: SHA-256 of its body.
func Hash(body []byte) []byte {
	s := sha256.Sum256(body)
	return s[:]
}

// ItemVersionRow is an item version as stored: every column the service
// writes, jsonb ones as their JSON text.
type ItemVersionRow struct {
	Project, Key                        string
	Version                             int
	Deleted                             bool
	Kind, Source, Title, Summary        string
	Content                             string
	Priority                            int
	Authority, Confidence, StateKey     string
	ValidFrom, ValidUntil               *time.Time
	Slot                                string
	Trigger                             []byte
	VisibleTo, HiddenFrom               []string
	Template                            bool
	Metadata, Provenance                []byte
	FieldsSHA256, ContentSHA256         []byte
	TokensO200k, TokensCl100k           int
	BlockTokensO200k, BlockTokensCl100k int
	CreatedAt                           time.Time
	CreatedBy                           string
}

// ItemVersionSubject names an item version in its chain.
func ItemVersionSubject(key string, version int) string {
	return key + "@" + strconv.Itoa(version)
}

// ItemVersionBody is an item version's entry body: a JSON object with
// exactly these members in this order, no white space, strings as
// encoding/json writes them, times as RFC 3339 UTC with six fractional
// digits, binary values as lowercase hex, the jsonb columns in
// CanonicalJSON, and for the content its SHA-256 instead of its text
// ("content_sha256_of", next to the stored "content_sha256"):
//
//	{"entry":"item_version","project":…,"key":…,"version":…,"deleted":…,
//	 "kind":…,"source":…,"title":…,"summary":…,"content_sha256_of":…,
//	 "priority":…,"authority":…,"confidence":…,"state_key":…,
//	 "valid_from":…|null,"valid_until":…|null,"slot":…,"trigger":{…},
//	 "visible_to":[…],"hidden_from":[…],"template":…,"metadata":{…},
//	 "provenance":{…},"fields_sha256":…,"content_sha256":…,
//	 "tokens_o200k":…,"tokens_cl100k":…,"block_tokens_o200k":…,
//	 "block_tokens_cl100k":…,"created_at":…,"created_by":…}
func ItemVersionBody(r ItemVersionRow) ([]byte, error) {
	trig, err := CanonicalJSON(r.Trigger)
	if err != nil {
		return nil, fmt.Errorf("trigger: %w", err)
	}
	meta, err := CanonicalJSON(r.Metadata)
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	prov, err := CanonicalJSON(r.Provenance)
	if err != nil {
		return nil, fmt.Errorf("provenance: %w", err)
	}
	content := sha256.Sum256([]byte(r.Content))
	body := struct {
		Entry             string          `json:"entry"`
		Project           string          `json:"project"`
		Key               string          `json:"key"`
		Version           int             `json:"version"`
		Deleted           bool            `json:"deleted"`
		Kind              string          `json:"kind"`
		Source            string          `json:"source"`
		Title             string          `json:"title"`
		Summary           string          `json:"summary"`
		ContentOf         string          `json:"content_sha256_of"`
		Priority          int             `json:"priority"`
		Authority         string          `json:"authority"`
		Confidence        string          `json:"confidence"`
		StateKey          string          `json:"state_key"`
		ValidFrom         *string         `json:"valid_from"`
		ValidUntil        *string         `json:"valid_until"`
		Slot              string          `json:"slot"`
		Trigger           json.RawMessage `json:"trigger"`
		VisibleTo         []string        `json:"visible_to"`
		HiddenFrom        []string        `json:"hidden_from"`
		Template          bool            `json:"template"`
		Metadata          json.RawMessage `json:"metadata"`
		Provenance        json.RawMessage `json:"provenance"`
		FieldsSHA256      string          `json:"fields_sha256"`
		ContentSHA256     string          `json:"content_sha256"`
		TokensO200k       int             `json:"tokens_o200k"`
		TokensCl100k      int             `json:"tokens_cl100k"`
		BlockTokensO200k  int             `json:"block_tokens_o200k"`
		BlockTokensCl100k int             `json:"block_tokens_cl100k"`
		CreatedAt         string          `json:"created_at"`
		CreatedBy         string          `json:"created_by"`
	}{
		KindItemVersion, r.Project, r.Key, r.Version, r.Deleted, r.Kind, r.Source, r.Title, r.Summary,
		hex.EncodeToString(content[:]), r.Priority, r.Authority, r.Confidence, r.StateKey,
		Time(r.ValidFrom), Time(r.ValidUntil), r.Slot, trig, nonNil(r.VisibleTo), nonNil(r.HiddenFrom), r.Template,
		meta, prov, hex.EncodeToString(r.FieldsSHA256), hex.EncodeToString(r.ContentSHA256),
		r.TokensO200k, r.TokensCl100k, r.BlockTokensO200k, r.BlockTokensCl100k, *Time(&r.CreatedAt), r.CreatedBy,
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(body); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Time is a time as bodies hold it: RFC 3339 in UTC with microseconds,
// the precision PostgreSQL keeps (a time written is truncated to it
// first, as the database does).
func Time(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := t.UTC().Truncate(time.Microsecond).Format("2006-01-02T15:04:05.000000Z")
	return &s
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
