// Package navi speaks navi-core's ContextPacket: the JSON its serde derive
// reads (Parse), the text its render_context_packets writes (Render, Block),
// and the mapping between a packet and a contextd item (ToItem, FromItem),
// sources (Source.ItemSource, FromItemSource) and keys (Key) both ways. It
// is pure: no database, no network, no clock; the same input gives the same
// output.
//
// navi's Rust, for reference:
//
//	pub enum ContextSource { File, Project, UserSelection, CanvasNode, StudyBlock,
//	    FocusThread, MaterialExcerpt, SessionSummary, Decision, MemorySearch, Other(String) }
//	pub struct ContextPacket {
//	    #[serde(default)] pub id: Option<String>,
//	    pub source: ContextSource,
//	    #[serde(default)] pub title: Option<String>,
//	    pub content: String,
//	    #[serde(default)] pub priority: i32,
//	    #[serde(default = "default_context_metadata")] pub metadata: Value, // {}
//	}
package navi

import (
	"encoding/json"
	"strings"
)

// The unit variants of navi's ContextSource, in declaration order, and
// Other, its one newtype variant.
const (
	File            = "File"
	Project         = "Project"
	UserSelection   = "UserSelection"
	CanvasNode      = "CanvasNode"
	StudyBlock      = "StudyBlock"
	FocusThread     = "FocusThread"
	MaterialExcerpt = "MaterialExcerpt"
	SessionSummary  = "SessionSummary"
	Decision        = "Decision"
	MemorySearch    = "MemorySearch"
	Other           = "Other"
)

// unitVariants maps each unit variant to its contextd source.
var unitVariants = map[string]string{
	File: "file", Project: "project", UserSelection: "user_selection", CanvasNode: "canvas_node",
	StudyBlock: "study_block", FocusThread: "focus_thread", MaterialExcerpt: "material_excerpt",
	SessionSummary: "session_summary", Decision: "decision", MemorySearch: "memory_search",
}

// variantList is serde's "expected one of" list, in declaration order.
const variantList = "`File`, `Project`, `UserSelection`, `CanvasNode`, `StudyBlock`, `FocusThread`, `MaterialExcerpt`, `SessionSummary`, `Decision`, `MemorySearch`, `Other`"

// Source is a value of navi's ContextSource: Variant is one of the
// constants above; Tag is Other's string (empty for a unit variant).
type Source struct {
	Variant string
	Tag     string
}

// Unit is the unit variant named v (File, Project, ...).
func Unit(v string) Source { return Source{Variant: v} }

// OtherSource is ContextSource::Other(tag).
func OtherSource(tag string) Source { return Source{Variant: Other, Tag: tag} }

// Debug is the source as Rust's derived Debug prints it ({:?}): the
// variant's name, or Other("tag") with the tag escaped as Rust's
// <str as Debug> escapes it.
func (s Source) Debug() string {
	if s.Variant == Other {
		return "Other(" + DebugString(s.Tag) + ")"
	}
	return s.Variant
}

// MarshalJSON is serde's externally tagged form: "File", or {"Other":"tag"}.
func (s Source) MarshalJSON() ([]byte, error) {
	if s.Variant == Other {
		tag, err := marshalString(s.Tag)
		if err != nil {
			return nil, err
		}
		return []byte(`{"Other":` + tag + `}`), nil
	}
	v, err := marshalString(s.Variant)
	return []byte(v), err
}

// Packet is navi's ContextPacket. ID and Title are nil for None. Metadata
// is navi's serde_json::Value as it was sent (any JSON value; {} when the
// packet had none).
type Packet struct {
	ID       *string
	Source   Source
	Title    *string
	Content  string
	Priority int32
	Metadata json.RawMessage
}

// MarshalJSON writes the packet as serde's derived Serialize does: every
// field, in declaration order, None as null. (Whitespace aside: serde_json
// writes compact JSON, and so does this; strings escape as encoding/json
// escapes them without HTML escaping, which serde_json reads back the same.)
func (p Packet) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteString(`{"id":`)
	if err := writeOptString(&b, p.ID); err != nil {
		return nil, err
	}
	src, err := p.Source.MarshalJSON()
	if err != nil {
		return nil, err
	}
	b.WriteString(`,"source":` + string(src) + `,"title":`)
	if err := writeOptString(&b, p.Title); err != nil {
		return nil, err
	}
	content, err := marshalString(p.Content)
	if err != nil {
		return nil, err
	}
	meta := p.Metadata
	if len(meta) == 0 {
		meta = json.RawMessage(`{}`)
	}
	compact, err := compactJSON(meta)
	if err != nil {
		return nil, err
	}
	b.WriteString(`,"content":` + content + `,"priority":` + itoa(int64(p.Priority)) + `,"metadata":` + compact + `}`)
	return []byte(b.String()), nil
}

func writeOptString(b *strings.Builder, s *string) error {
	if s == nil {
		b.WriteString("null")
		return nil
	}
	q, err := marshalString(*s)
	if err != nil {
		return err
	}
	b.WriteString(q)
	return nil
}
