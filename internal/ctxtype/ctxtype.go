// Package ctxtype holds the plain types of contextd's vocabulary that the
// pure core needs — an item version with its trigger, roles and provenance,
// the packet request an agent sends, and the records, spans and gaps an
// assembly produces — and nothing that does I/O (like river's rivertype).
// The store builds these values from rows, the services pass them around,
// and the assembly pipeline and the renderers read them; a package that
// imports ctxtype pulls in no database, store or HTTP code.
package ctxtype

import (
	"cmp"
	"encoding/json"
	"regexp"
	"slices"
	"time"

	"github.com/contextd/contextd/internal/token"
)

// SharedProject is the reserved project of shared defaults: readable by
// every agent, writable by admins only, and a layer of every packet.
const SharedProject = "_shared"

var keyRE = regexp.MustCompile(`^[A-Za-z0-9._:-]{1,200}$`)

// ValidKey reports whether key may name an item. "." and ".." match the
// pattern but cannot be a path segment: URL libraries (Go's, and every
// client following RFC 3986) remove them as dot segments, so such an item
// could be written with a raw request and never read through a client.
func ValidKey(key string) bool { return keyRE.MatchString(key) && key != "." && key != ".." }

// KeyRule is the key rule as the API's messages state it.
const KeyRule = `item keys match [A-Za-z0-9._:-]{1,200} and are not "." or ".."`

// Trigger says when an item enters a packet. Exactly one member is set;
// Match goes with Keywords only.
type Trigger struct {
	Always   bool     `json:"always,omitempty"`
	Keywords []string `json:"keywords,omitempty"`
	// Match is how keywords match: "" for whole words (the default, which
	// a client may spell "word"), MatchStem for stems.
	Match      string  `json:"match,omitempty"`
	Tool       *string `json:"tool,omitempty"`
	PinnedOnly bool    `json:"pinned_only,omitempty"`
	Relevance  bool    `json:"relevance,omitempty"`
}

// MatchStem is the Match of keywords compared by their stems.
const MatchStem = "stem"

// Stem reports whether the trigger's keywords match by stems.
func (t Trigger) Stem() bool { return t.Match == MatchStem }

// Kind names the trigger's one member.
func (t Trigger) Kind() string {
	switch {
	case t.Always:
		return "always"
	case t.Keywords != nil:
		return "keywords"
	case t.Tool != nil:
		return "tool"
	case t.PinnedOnly:
		return "pinned_only"
	case t.Relevance:
		return "relevance"
	}
	return ""
}

// Roles restricts which agent roles may see an item. Empty VisibleTo means
// every role; HiddenFrom wins over VisibleTo.
type Roles struct {
	VisibleTo  []string `json:"visible_to"`
	HiddenFrom []string `json:"hidden_from"`
}

// Visible reports whether an agent of role may see an item with these roles.
func (r Roles) Visible(role string) bool {
	if slices.Contains(r.HiddenFrom, role) {
		return false
	}
	return len(r.VisibleTo) == 0 || slices.Contains(r.VisibleTo, role)
}

// Provenance says where an item came from.
type Provenance struct {
	SourceRef   string   `json:"source_ref,omitempty"`
	DerivedFrom []string `json:"derived_from"`
}

// Fields are everything a client sets on a version, with defaults applied.
// Their canonical JSON is what decides whether a write changed anything.
type Fields struct {
	Kind       string          `json:"kind"`
	Source     string          `json:"source"`
	Title      string          `json:"title"`
	Summary    string          `json:"summary"`
	Content    string          `json:"content"`
	Priority   int             `json:"priority"`
	Authority  string          `json:"authority"`
	Confidence string          `json:"confidence"`
	StateKey   string          `json:"state_key"`
	ValidFrom  *time.Time      `json:"valid_from"`
	ValidUntil *time.Time      `json:"valid_until"`
	Slot       string          `json:"slot"`
	Trigger    Trigger         `json:"trigger"`
	Roles      Roles           `json:"roles"`
	Template   bool            `json:"template"`
	Metadata   json.RawMessage `json:"metadata"`
	Provenance Provenance      `json:"provenance"`
}

// Version is one immutable version of an item.
type Version struct {
	Project string
	Key     string
	Version int
	Deleted bool
	Fields
	ContentSHA256 string
	Tokens        token.Counts
	BlockTokens   token.Counts // of render.MarkdownItemBlock(Title, Content)
	CreatedAt     time.Time
	CreatedBy     string
	XactID        int64
}

// RankPos is an always-on item's place in its layer's rank order, as the
// database's items_always_rank_idx stores it: ascending RankPos is
// descending authority, priority and confidence, then the newer version,
// then the key — exactly the packet's rank order for unpinned items
// without a relevance score.
type RankPos struct {
	Authority  int16
	Priority   int64
	Confidence int16
	Time       int64
	Key        string
}

// Compare orders positions. It stops at the first column that differs
// (cmp.Or would compare every column, the key's string too, first): the
// keyword lane sorts ~1,000 positions a packet at 100,000 items, and every
// lane merge and cursor compares them.
func (a RankPos) Compare(b RankPos) int {
	if a.Authority != b.Authority {
		return cmp.Compare(a.Authority, b.Authority)
	}
	if a.Priority != b.Priority {
		return cmp.Compare(a.Priority, b.Priority)
	}
	if a.Confidence != b.Confidence {
		return cmp.Compare(a.Confidence, b.Confidence)
	}
	if a.Time != b.Time {
		return cmp.Compare(a.Time, b.Time)
	}
	return cmp.Compare(a.Key, b.Key)
}
