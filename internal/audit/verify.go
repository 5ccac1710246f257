package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Problem is the first thing a verification found wrong.
type Problem struct {
	Seq    int64  // the first bad seq
	Code   string // ContentChanged, EntryMissing, ...
	Detail string
}

func (p *Problem) Error() string { return fmt.Sprintf("seq %d: %s: %s", p.Seq, p.Code, p.Detail) }

// Verifier checks one chain, entry by entry in seq order, then the rows
// the chain says exist (Covered) and the mutable state its entries imply
// (ItemState). It stops at the first problem.
type Verifier struct {
	prev    []byte
	seq     int64
	problem *Problem
	// covered are the subjects of append-only kinds the entries cover
	// (by ref); latest the last entry of each subject of a mutable kind;
	// items the last version of each key with its seq.
	covered map[string]bool
	latest  map[string]latestEntry
	items   map[string]itemHead
	// pending are redacted bodies whose redaction entry is still to come
	// (by subject, with the seq of the redacted entry); redacted counts
	// the entries redacted with their redaction.
	pending  map[string]int64
	redacted int64
	// redactedPackets are the packets whose entries are redacted.
	redactedPackets []RedactedPacket
	// chain and checkSeal are set by RequireSeals; sealed is the last seq
	// a seal (or a checkpoint, Trust) covered, seals how many seals were
	// seen, adopted the last seq a start seal covered, sealProblem the
	// first problem with them (reported last, by SealedToEnd).
	chain       string
	checkSeal   SealCheck
	sealed      int64
	seals       int
	adopted     int64
	sealProblem *Problem
}

type latestEntry struct {
	seq  int64
	body []byte
}

func ref(kind, subject string) string { return kind + "\x00" + subject }

type itemHead struct {
	seq     int64
	version int
	deleted bool
}

// NewVerifier starts at the genesis of a chain.
func NewVerifier() *Verifier {
	return &Verifier{prev: Genesis, covered: map[string]bool{}, latest: map[string]latestEntry{}, items: map[string]itemHead{}, pending: map[string]int64{}}
}

// Redacted is how many entries were found redacted, each by a redaction
// the chain records.
func (v *Verifier) Redacted() int64 { return v.redacted }

// redactedEntry checks an entry whose body a redaction replaced: its hashes
// stay what they were and cannot be recomputed, so its place in the chain
// is checked, a redacted version's row must hold the marker and nothing
// else, and an entry of the redaction must follow (for a version, the
// redaction; for a packet, its packet_redaction).
func (v *Verifier) redactedEntry(e Entry, now []byte) bool {
	if !bytes.Equal(Link(v.prev, e.EntryHash), e.ChainHash) {
		return v.fail(e.Seq, OrderChanged, "the entry's chain hash does not follow from seq %d's (%s %s)", v.seq, e.Kind, e.Subject)
	}
	if e.Kind == KindItemVersion {
		var row struct {
			Of     string `json:"content_sha256_of"`
			Stored string `json:"content_sha256"`
		}
		marker := sha256.Sum256([]byte(RedactedContent))
		if now == nil || json.Unmarshal(now, &row) != nil || row.Of != hex.EncodeToString(marker[:]) || row.Stored != hex.EncodeToString(make([]byte, 32)) {
			return v.fail(e.Seq, ContentChanged, "%s is redacted, but its row holds other content than the marker", e.Subject)
		}
		key, n, _ := splitVersion(e.Subject)
		v.items[key] = itemHead{seq: e.Seq, version: n}
	}
	if v.covered[ref(e.Kind, e.Subject)] {
		return v.fail(e.Seq, OrderChanged, "%s %s has an entry already", e.Kind, e.Subject)
	}
	if e.Kind == KindPacket {
		red, _, _ := redactedOf(e.Body)
		v.redactedPackets = append(v.redactedPackets, RedactedPacket{ID: e.Subject, Redaction: red, Seq: e.Seq})
	}
	v.pending[ref(e.Kind, e.Subject)] = e.Seq
	v.covered[ref(e.Kind, e.Subject)] = true
	v.prev, v.seq = e.ChainHash, e.Seq
	return true
}

// RedactedContent is a redacted version's content.
const RedactedContent = "[redacted]"

// LatestSubjects are the subjects of a mutable kind that have entries.
func (v *Verifier) LatestSubjects(kind string) []string {
	var out []string
	prefix := ref(kind, "")
	for r := range v.latest {
		if s, ok := strings.CutPrefix(r, prefix); ok {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

func splitVersion(subject string) (string, int, bool) {
	i := strings.LastIndexByte(subject, '@')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(subject[i+1:])
	return subject[:i], n, err == nil
}

// Problem is the first problem found, or nil.
func (v *Verifier) Problem() *Problem { return v.problem }

// Entries is how many entries were checked, and Head the chain hash of
// the last.
func (v *Verifier) Entries() int64 { return v.seq }

// Head is the chain hash after the last entry checked (Genesis before any).
func (v *Verifier) Head() []byte { return v.prev }

func (v *Verifier) fail(seq int64, code, format string, args ...any) bool {
	if v.problem == nil {
		v.problem = &Problem{Seq: seq, Code: code, Detail: fmt.Sprintf(format, args...)}
	}
	return false
}

// Entry checks the next entry. now is the body recomputed from the row it
// covers as that row is now, nil when the row is gone. It reports whether
// the chain is still sound.
func (v *Verifier) Entry(e Entry, now []byte) bool {
	if !v.entry(e, now) {
		return false
	}
	if v.checkSeal != nil && e.Seal != nil {
		v.seal(e)
	}
	return true
}

func (v *Verifier) entry(e Entry, now []byte) bool {
	if v.problem != nil {
		return false
	}
	want := v.seq + 1
	switch {
	case e.Seq > want:
		return v.fail(want, EntryMissing, "the chain goes from seq %d to %d", v.seq, e.Seq)
	case e.Seq < want:
		return v.fail(e.Seq, OrderChanged, "seq %d comes again after seq %d", e.Seq, v.seq)
	}
	if _, subject, ok := redactedOf(e.Body); ok && (e.Kind == KindItemVersion || e.Kind == KindPacket) && subject == e.Subject {
		return v.redactedEntry(e, now)
	}
	if !bytes.Equal(Hash(e.Body), e.EntryHash) {
		return v.fail(e.Seq, ContentChanged, "the entry's body does not hash to its entry hash (%s %s)", e.Kind, e.Subject)
	}
	if !Mutable(e.Kind) {
		if now == nil {
			return v.fail(e.Seq, ContentChanged, "%s %s is gone", e.Kind, e.Subject)
		}
		if !bytes.Equal(now, e.Body) {
			return v.fail(e.Seq, ContentChanged, "%s %s is not what was written: %s", e.Kind, e.Subject, firstDiff(e.Body, now))
		}
	}
	if !bytes.Equal(Link(v.prev, e.EntryHash), e.ChainHash) {
		return v.fail(e.Seq, OrderChanged, "the entry's chain hash does not follow from seq %d's (%s %s)", v.seq, e.Kind, e.Subject)
	}
	if e.Kind == KindItemVersion {
		var b struct {
			Key     string `json:"key"`
			Version int    `json:"version"`
			Deleted bool   `json:"deleted"`
		}
		if err := json.Unmarshal(e.Body, &b); err != nil || ItemVersionSubject(b.Key, b.Version) != e.Subject {
			return v.fail(e.Seq, ContentChanged, "the entry's body does not name its subject %s", e.Subject)
		}
		if h, ok := v.items[b.Key]; ok && b.Version != h.version+1 || !ok && b.Version != 1 {
			return v.fail(e.Seq, OrderChanged, "%s follows version %d", e.Subject, v.items[b.Key].version)
		}
		v.items[b.Key] = itemHead{seq: e.Seq, version: b.Version, deleted: b.Deleted}
	}
	if e.Kind == KindRedaction {
		var b struct {
			Key     string `json:"key"`
			Version int    `json:"version"`
		}
		_ = json.Unmarshal(e.Body, &b)
		if _, ok := v.pending[ref(KindItemVersion, ItemVersionSubject(b.Key, b.Version))]; ok {
			delete(v.pending, ref(KindItemVersion, ItemVersionSubject(b.Key, b.Version)))
			v.redacted++
		}
	}
	if e.Kind == KindPacketRedaction {
		delete(v.pending, ref(KindPacket, e.Subject))
	}
	if !Mutable(e.Kind) && v.covered[ref(e.Kind, e.Subject)] {
		return v.fail(e.Seq, OrderChanged, "%s %s has an entry already", e.Kind, e.Subject)
	}
	if Mutable(e.Kind) {
		v.latest[ref(e.Kind, e.Subject)] = latestEntry{seq: e.Seq, body: e.Body}
	} else {
		v.covered[ref(e.Kind, e.Subject)] = true
	}
	v.prev, v.seq = e.ChainHash, e.Seq
	return true
}

// Covered checks that a row of an append-only kind that exists has an
// entry.
func (v *Verifier) Covered(kind, subject string) bool {
	if v.problem != nil {
		return false
	}
	if !v.covered[ref(kind, subject)] {
		return v.fail(v.seq+1, EntryMissing, "%s %s has no entry", kind, subject)
	}
	return true
}

// Current checks a row of a mutable kind, as its body now, against the
// last entry of its subject.
func (v *Verifier) Current(kind, subject string, now []byte) bool {
	if v.problem != nil {
		return false
	}
	l, ok := v.latest[ref(kind, subject)]
	switch {
	case !ok:
		return v.fail(v.seq+1, StateMismatch, "%s %s has a row but no entry", kind, subject)
	case !bytes.Equal(l.body, now):
		// A redacted packet's text is append-only content a redaction
		// overwrote, not a state that moves: a change is content_changed.
		code := StateMismatch
		if kind == KindPacketRedaction {
			code = ContentChanged
		}
		return v.fail(l.seq, code, "%s %s is not what its last entry says: %s", kind, subject, firstDiff(l.body, now))
	}
	return true
}

// MissingCurrent reports the first subject of a mutable kind that has
// entries but no row among seen.
func (v *Verifier) MissingCurrent(kind string, seen map[string]bool) bool {
	if v.problem != nil {
		return false
	}
	missing := map[string]int64{}
	prefix := ref(kind, "")
	for r, l := range v.latest {
		if s, ok := strings.CutPrefix(r, prefix); ok && !seen[s] {
			missing[s] = l.seq
		}
	}
	if first, seq := earliest(missing); first != "" {
		return v.fail(seq, StateMismatch, "%s %s is in the chain but has no row", kind, first)
	}
	return true
}

// earliest is the name of the smallest seq in m ("" when m is empty):
// the first bad seq among several. (Seqs are unique, so it is one name.)
func earliest(m map[string]int64) (string, int64) {
	var first string
	var seq int64
	for k, s := range m {
		if first == "" || s < seq {
			first, seq = k, s
		}
	}
	return first, seq
}

// ItemState checks an item row's current version and liveness against
// the entries of its versions.
func (v *Verifier) ItemState(key string, current int, live bool) bool {
	if v.problem != nil {
		return false
	}
	h, ok := v.items[key]
	switch {
	case !ok:
		return v.fail(v.seq+1, StateMismatch, "item %s has a row but no version in the chain", key)
	case h.version != current:
		return v.fail(h.seq, StateMismatch, "item %s is at version %d, its chain at %d", key, current, h.version)
	case live == h.deleted:
		return v.fail(h.seq, StateMismatch, "item %s is live=%t, but version %d is %s", key, live, h.version, map[bool]string{true: "a tombstone", false: "live"}[h.deleted])
	}
	return true
}

// ItemMirrors checks, after ItemState, that an item row's copies of its
// current version's columns (the rank, roles, window, block tokens,
// content hash and the other columns packets are assembled from) are the
// version's: a row rewritten by hand would change what packets include
// and how they rank it, leaving every entry intact.
func (v *Verifier) ItemMirrors(key string, mirrors bool) bool {
	if v.problem != nil {
		return false
	}
	if h := v.items[key]; !mirrors {
		return v.fail(h.seq, StateMismatch, "item %s's row disagrees with its version %d in the columns packets are assembled from", key, h.version)
	}
	return true
}

// Items is how many items the chain says exist; after every item row
// passed ItemState, a smaller count of rows means rows were removed.
func (v *Verifier) Items() int { return len(v.items) }

// MissingItem reports the first item the chain has that the rows lacked,
// given the keys of every row seen.
func (v *Verifier) MissingItem(seen map[string]bool) bool {
	if v.problem != nil {
		return false
	}
	missing := map[string]int64{}
	for k, h := range v.items {
		if !seen[k] {
			missing[k] = h.seq
		}
	}
	if first, seq := earliest(missing); first != "" {
		return v.fail(seq, StateMismatch, "item %s is in the chain but has no row", first)
	}
	return true
}

// firstDiff says where two bodies part, for a problem's detail.
func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	from := max(0, i-24)
	clip := func(s []byte) string { return string(s[from:min(len(s), i+24)]) }
	return fmt.Sprintf("at byte %d, written …%s…, now …%s…", i, clip(a), clip(b))
}

// HexHead is a head as the API shows it.
func HexHead(h []byte) string { return hex.EncodeToString(h) }

// Extra reports an entry past the head the chain's head row names.
func (v *Verifier) Extra(seq, head int64) bool {
	return v.fail(seq, ExtraEntry, "an entry at seq %d is past the head at seq %d", seq, head)
}

// AtHead checks, after the last entry, that the head row names it.
func (v *Verifier) AtHead(seq int64, hash []byte) bool {
	if v.problem != nil {
		return false
	}
	if first, seq := earliest(v.pending); first != "" {
		return v.fail(seq, ContentChanged, "the entry's body was replaced as redacted, but no entry of that redaction follows it")
	}
	switch {
	case v.seq < seq:
		return v.fail(v.seq+1, EntryMissing, "the head is at seq %d, the entries end at seq %d", seq, v.seq)
	case !bytes.Equal(v.prev, hash):
		return v.fail(seq, ContentChanged, "the head's hash %s is not the last entry's chain hash %s", HexHead(hash), HexHead(v.prev))
	}
	return true
}

// Mismatch reports a state mismatch found outside the entries (a stored
// answer whose HMAC fails), after the last entry.
func (v *Verifier) Mismatch(detail string) bool {
	return v.fail(v.seq+1, StateMismatch, "%s", detail)
}
