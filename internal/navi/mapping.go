package navi

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/contextd/contextd/internal/ctxtype"
)

// maxTag is the longest tag contextd's other:<tag> takes.
const maxTag = 64

// ItemSource is the contextd source of s: each unit variant its snake_case
// name (CanvasNode → canvas_node), Other(tag) → other:<tag>. A tag outside
// contextd's [A-Za-z0-9._-]{1,64} is made to fit: every other character
// (a code point) becomes "_", an empty tag is "_", a longer one is cut to
// 64 bytes; exact is then false, and ToItem keeps the original in
// metadata.navi.source so that FromItem gives it back. An unknown variant
// maps to other:<variant>, made to fit likewise.
func (s Source) ItemSource() (source string, exact bool) {
	if s.Variant != Other {
		if src, ok := unitVariants[s.Variant]; ok {
			return src, true
		}
		return s.otherTag(s.Variant)
	}
	return s.otherTag(s.Tag)
}

func (Source) otherTag(tag string) (string, bool) {
	fitted := sanitize(tag, func(r rune) bool { return isTagByte(r) })
	if fitted == "" {
		fitted = "_"
	}
	if len(fitted) > maxTag {
		fitted = fitted[:maxTag]
	}
	return "other:" + fitted, fitted == tag
}

func isTagByte(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
}

// sanitize replaces every code point of s that keep refuses by "_".
func sanitize(s string, keep func(rune) bool) string {
	var b strings.Builder
	for _, r := range s {
		if keep(r) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// itemToVariant is unitVariants reversed.
var itemToVariant = func() map[string]string {
	m := make(map[string]string, len(unitVariants))
	for v, src := range unitVariants {
		m[src] = v
	}
	return m
}()

// FromItemSource is the navi source of a contextd source: the ten that
// navi names are its unit variants (canvas_node → CanvasNode), other:<tag>
// is Other(tag), and every other one (rag, memory, steering, human, git,
// workflow, tool, peer, external, derived) is Other(source), so rag is
// Other("rag").
func FromItemSource(source string) Source {
	if v, ok := itemToVariant[source]; ok {
		return Unit(v)
	}
	if tag, ok := strings.CutPrefix(source, "other:"); ok {
		return OtherSource(tag)
	}
	return OtherSource(source)
}

// DebugSource is FromItemSource(source).Debug(): how navi's renderer would
// name a contextd source (CanvasNode, Other("rag")).
func DebugSource(source string) string { return FromItemSource(source).Debug() }

// maxKey is the longest item key (ctxtype.ValidKey).
const maxKey = 200

// Key is the item key of p, deterministically:
//   - an id that is a valid key (ctxtype.ValidKey: [A-Za-z0-9._:-]{1,200})
//     is the key;
//   - any other id (empty, too long, other characters) is the id with each
//     refused code point as "_", cut to 183 bytes, then "_" and the first 16
//     hex digits of the id's SHA-256, so two ids never share a key (a valid
//     id spelling another id's mapped key aside);
//   - no id: "navi:" and the first 24 hex digits of the SHA-256 of the
//     source (Debug form), the title and the content, each length-prefixed
//     (a missing title apart from an empty one), so the same packet sent
//     again is the same item.
func Key(p Packet) string {
	if p.ID != nil {
		id := *p.ID
		if id != "" {
			return ctxtype.KeyFor(id)
		}
		sum := sha256.Sum256([]byte(id))
		suffix := "_" + hex.EncodeToString(sum[:])[:16]
		fitted := sanitize(id, func(r rune) bool { return isTagByte(r) || r == ':' })
		if len(fitted) > maxKey-len(suffix) {
			fitted = fitted[:maxKey-len(suffix)]
		}
		return fitted + suffix
	}
	h := sha256.New()
	field := func(s string) { h.Write([]byte(strconv.Itoa(len(s)) + ":" + s)) }
	field(p.Source.Debug())
	if p.Title == nil {
		h.Write([]byte("-"))
	} else {
		field(*p.Title)
	}
	field(p.Content)
	return "navi:" + hex.EncodeToString(h.Sum(nil))[:24]
}

// ItemKind is the kind of every imported packet: knowledge. A packet is
// reference context the client hands the agent, which is what knowledge
// is (contextd's default kind, under Project Knowledge); navi's source says
// where it came from, not what it is, and the other kinds carry rules a
// packet does not ask for (state supersedes by state key, skill and tool
// have sections and slots of their own, instruction and decision claim an
// authority the client did not give).
const ItemKind = "knowledge"

// Item is what an item write needs from a packet, in the shape of
// item.Input's fields (internal/item imports the store, so navi, which is
// pure, cannot return an item.Input itself): Title "" is no title.
// Authority, confidence, slot and the rest take the item defaults.
type Item struct {
	Key      string
	Kind     string
	Source   string
	Title    string
	Content  string
	Priority int32
	Trigger  ctxtype.Trigger // always {"always":true}
	Metadata json.RawMessage // {"navi":{...}}, see ToItem
}

// ToItem maps a packet to an item write: Key(p), kind knowledge, the
// source by Source.ItemSource, title (None as ""), content and priority as
// they are, the always-on trigger (navi injects every packet it is given),
// and metadata {"navi":{"id":…,"source":…,"metadata":…}}: the packet's id
// when it had one (even a valid one, so FromItem can tell "no id" from
// "the key is the id"), its source in navi's JSON ("CanvasNode",
// {"Other":"tag"} — the tag exactly as sent), navi's own metadata as sent,
// and "title":"" when the title was Some("") (which contextd cannot tell
// from no title).
func ToItem(p Packet) Item {
	src, _ := p.Source.ItemSource()
	it := Item{Key: Key(p), Kind: ItemKind, Source: src, Content: p.Content, Priority: p.Priority,
		Trigger: ctxtype.Trigger{Always: true}}
	if p.Title != nil {
		it.Title = *p.Title
	}
	var b bytes.Buffer
	b.WriteString(`{"navi":{`)
	if p.ID != nil {
		id, _ := marshalString(*p.ID)
		b.WriteString(`"id":` + id + `,`)
	}
	if p.Title != nil && *p.Title == "" {
		b.WriteString(`"title":"",`)
	}
	source, _ := p.Source.MarshalJSON()
	meta := p.Metadata
	if len(bytes.TrimSpace(meta)) == 0 {
		meta = json.RawMessage(`{}`)
	}
	b.WriteString(`"source":` + string(source) + `,"metadata":` + string(meta) + `}}`)
	it.Metadata = b.Bytes()
	return it
}

// FromItem is the packet an item exports as (items export in navi's
// format), the reverse of ToItem: from metadata.navi, when the item has
// one, the id (absent: None), the source and navi's metadata; otherwise the
// key is the id, the source is FromItemSource's, and the item's metadata is
// navi's. A title "" is None (unless metadata.navi says "title":""), and
// the priority is clamped to i32.
func FromItem(key, source, title, content string, priority int, metadata json.RawMessage) Packet {
	p := Packet{Source: FromItemSource(source), Content: content, Metadata: metadata,
		Priority: int32(max(math.MinInt32, min(math.MaxInt32, priority)))}
	if len(bytes.TrimSpace(p.Metadata)) == 0 {
		p.Metadata = json.RawMessage(`{}`)
	}
	if title != "" {
		p.Title = &title
	}
	var m struct {
		Navi *struct {
			ID       *string         `json:"id"`
			Title    *string         `json:"title"`
			Source   json.RawMessage `json:"source"`
			Metadata json.RawMessage `json:"metadata"`
		} `json:"navi"`
	}
	if json.Unmarshal(metadata, &m) != nil || m.Navi == nil {
		id := key
		p.ID = &id
		return p
	}
	n := m.Navi
	p.ID = n.ID
	if n.Title != nil && *n.Title == "" && title == "" {
		p.Title = n.Title
	}
	if len(n.Source) > 0 {
		if s, code, _ := parseSource(n.Source, 0); code == "" {
			p.Source = s
		}
	}
	if len(n.Metadata) > 0 {
		p.Metadata = n.Metadata
	}
	return p
}
