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
	"crypto/sha256"
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
	Unsealed       = "unsealed"        // entries no seal of the audit key covers, or whose seal does not verify
)

// Entry is one link of a chain as stored.
type Entry struct {
	Seq       int64
	Kind      string
	Subject   string
	Body      []byte
	EntryHash []byte
	ChainHash []byte
	// Seal is the seal that ends at this entry, if any.
	Seal *Seal
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

// ItemVersionBody is an item version's entry body (see object for the
// encoding), with these members in this order; the content is there as its
// SHA-256 ("content_sha256_of"), next to the stored "content_sha256":
//
//	entry ("item_version"), project, key, version, deleted, kind, source,
//	title, summary, content_sha256_of, priority, authority, confidence,
//	state_key, valid_from, valid_until, slot, trigger, visible_to,
//	hidden_from, template, metadata, provenance, fields_sha256,
//	content_sha256, tokens_o200k, tokens_cl100k, block_tokens_o200k,
//	block_tokens_cl100k, created_at, created_by
func ItemVersionBody(r ItemVersionRow) ([]byte, error) {
	return newObject(KindItemVersion).str("project", r.Project).str("key", r.Key).int("version", int64(r.Version)).
		bool("deleted", r.Deleted).str("kind", r.Kind).str("source", r.Source).str("title", r.Title).
		str("summary", r.Summary).sha("content_sha256_of", r.Content).int("priority", int64(r.Priority)).
		str("authority", r.Authority).str("confidence", r.Confidence).str("state_key", r.StateKey).
		time("valid_from", r.ValidFrom).time("valid_until", r.ValidUntil).str("slot", r.Slot).
		json("trigger", r.Trigger).strs("visible_to", r.VisibleTo).strs("hidden_from", r.HiddenFrom).
		bool("template", r.Template).json("metadata", r.Metadata).json("provenance", r.Provenance).
		hex("fields_sha256", r.FieldsSHA256).hex("content_sha256", r.ContentSHA256).
		int("tokens_o200k", int64(r.TokensO200k)).int("tokens_cl100k", int64(r.TokensCl100k)).
		int("block_tokens_o200k", int64(r.BlockTokensO200k)).int("block_tokens_cl100k", int64(r.BlockTokensCl100k)).
		time("created_at", &r.CreatedAt).str("created_by", r.CreatedBy).bytes()
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
