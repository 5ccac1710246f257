package kxm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/validation"
)

// Imported is a KXM ContextItem as contextd writes it: the members of an
// item write (nil: not given, the write's default) and what to do after.
type Imported struct {
	Key                             string
	Kind, Source, Content           string
	Authority, Confidence           *string
	StateKey, ValidFrom, ValidUntil *string
	SourceRef                       string
	DerivedFrom                     []string
	// Propose: a proposed item, imported as a proposal that another
	// principal promotes (docs/proposals.md), never current until then.
	Propose bool
	// Retire: a superseded or rejected item, written and then tombstoned.
	Retire bool
	// SelfRef: its sourceRef named this very item in contextd, as an export
	// writes it: the item is contextd's own export coming back.
	SelfRef bool
	// Metadata is {"kxm": {...}}: every member without a home of its own
	// (observedAt, supersedes, evidenceRefs, status, a project other than
	// the importing one, members KXM may add), so nothing is dropped.
	Metadata json.RawMessage
}

// reserved are KXM's control-plane member names (RESERVED_CONTROL_PLANE_FIELDS
// in its context.ts): KXM refuses an item that carries one, and so does
// contextd, rather than keep a grant in metadata.
var reserved = map[string]bool{"permissions": true, "tools": true, "allow": true, "deny": true, "grants": true,
	"approval": true, "policy": true, "scopes": true, "credentials": true, "secrets": true, "token": true, "apiKey": true, "password": true}

// homes are the members that map to an item field; every other member
// goes under metadata.kxm.
var homes = map[string]bool{"id": true, "kind": true, "summary": true, "provenance": true, "authority": true,
	"confidence": true, "stateKey": true, "validFrom": true, "validUntil": true}

// Statuses are KXM's item lifecycle statuses.
var Statuses = []string{"current", "superseded", "proposed", "rejected"}

// KXM's vocabularies and limits (its context.ts): an import is held to
// what KXM's own parseContextItem accepts, so that what goes in can come
// back out as a ContextItem KXM reads.
var (
	kinds       = []string{"evidence", "state", "episode", "knowledge", "skill"}
	sourceTypes = []string{"human", "git", "workflow", "tool", "peer", "external", "derived"}
	authorities = []string{"policy", "instruction", "evidence", "hypothesis"}
	confidences = []string{"verified", "probable", "uncertain"}
)

// KXM's lengths, in UTF-16 code units as JavaScript counts them.
const (
	MaxID        = 128
	MaxStateKey  = 200
	MaxSourceRef = 512
	MaxRefs      = 64
)

// ParseItem reads one KXM ContextItem (raw, at JSON Pointer ptr of the
// request) for an import into project, adding every problem to errs: the
// members as KXM's parser checks them (required ones, its vocabularies,
// its lengths, a state item's stateKey and status, references that are
// unique non-empty identifiers, timestamps). contextd's own validation of
// the write comes after (its pointers mapped back by Pointer). A
// provenance sourceRef that names this very item in contextd (as an export
// writes it) is contextd's own, not an origin: it is not kept, and SelfRef
// says the item is an export of contextd coming back.
func ParseItem(raw json.RawMessage, project, ptr string, errs *validation.List) Imported {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		errs.Add(ptr, "type", "a KXM ContextItem must be a JSON object")
		return Imported{}
	}
	before := errs.Len()
	p := parser{m: m, ptr: ptr, errs: errs}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if reserved[k] {
			errs.Add(ptr+"/"+validation.EscapePointer(k), "forbidden_key", "context items may not carry the control-plane member %q (as KXM refuses it)", k)
		}
	}
	id := p.text("id", true, MaxID)
	out := Imported{Key: ctxtype.KeyFor(id), Kind: p.enum("kind", kinds), Content: p.text("summary", true, MaxSummary),
		Authority: ptrTo(p.enum("authority", authorities)), Confidence: ptrTo(p.enum("confidence", confidences)),
		StateKey: p.optText("stateKey", MaxStateKey), ValidFrom: p.timestamp("validFrom"), ValidUntil: p.timestamp("validUntil")}
	p.timestamp("observedAt")
	keep := map[string]json.RawMessage{}
	if id != "" && out.Key != id {
		keep["id"] = m["id"] // the key is a mapping of it; export gives the id back
	}
	out.Source, out.SourceRef, out.DerivedFrom, out.SelfRef = p.provenance(project, out.Key, keep)
	status := p.lifecycle(&out, id)
	for k, v := range m {
		if !homes[k] && !reserved[k] && !(k == "project" && jsonIs(v, project)) && !(k == "status" && status == "current") {
			keep[k] = v
		}
	}
	if errs.Len() > before {
		return Imported{}
	}
	out.Metadata = metadata(keep)
	return out
}

// lifecycle reads status and the rules that go with it: current (or none)
// is a live item, proposed is a proposal, superseded and rejected are
// retired; a state item names its state key and its status; supersedes and
// evidenceRefs are identifier lists, and an item does not supersede itself.
func (p parser) lifecycle(out *Imported, id string) string {
	status := p.optEnum("status", Statuses)
	switch status {
	case "proposed":
		out.Propose = true
	case "superseded", "rejected":
		out.Retire = true
	}
	if out.Kind == "state" {
		if out.StateKey == nil {
			p.errs.Add(p.ptr+"/stateKey", "required", "state items require a stateKey (as KXM's parser says)")
		}
		if status == "" {
			p.errs.Add(p.ptr+"/status", "required", "state items require an explicit lifecycle status (as KXM's parser says)")
		}
	}
	if refs := p.refs(p.m, "supersedes", p.ptr); slices.Contains(refs, id) && id != "" {
		p.errs.Add(p.ptr+"/supersedes", "invalid", "a context item cannot supersede itself")
	}
	p.refs(p.m, "evidenceRefs", p.ptr)
	return status
}

func ptrTo(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// metadata is {"kxm": keep}, or {} when there is nothing to keep.
func metadata(keep map[string]json.RawMessage) json.RawMessage {
	if len(keep) == 0 {
		return json.RawMessage(`{}`)
	}
	b, _ := json.Marshal(map[string]any{"kxm": keep})
	return b
}

func jsonIs(v json.RawMessage, s string) bool {
	var got string
	return json.Unmarshal(v, &got) == nil && got == s
}

// parser reads members of one object, reporting each problem at its pointer.
type parser struct {
	m    map[string]json.RawMessage
	ptr  string
	errs *validation.List
}

// opt is a string member, nil when absent or null.
func (p parser) opt(name string) *string {
	v, ok := p.m[name]
	if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return nil
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		p.errs.Add(p.ptr+"/"+name, "type", "%s must be a JSON string", name)
		return nil
	}
	return &s
}

// text is a string member that must not be blank when given (or when
// required) and is at most max UTF-16 units long, as KXM's requireString.
func (p parser) text(name string, required bool, max int) string {
	s := p.optText(name, max)
	if s == nil {
		if required && !p.has(name) {
			p.errs.Add(p.ptr+"/"+name, "required", "%s is required", name)
		}
		return ""
	}
	return *s
}

func (p parser) optText(name string, max int) *string {
	s := p.opt(name)
	if s == nil {
		return nil
	}
	if strings.TrimSpace(*s) == "" {
		p.errs.Add(p.ptr+"/"+name, "required", "%s must not be blank", name)
		return nil
	}
	if n := utf16Len(*s); n > max {
		p.errs.Add(p.ptr+"/"+name, "too_long", "%s is %d UTF-16 units long; KXM takes at most %d", name, n, max)
	}
	return s
}

// enum is a required member of one of vals; optEnum an optional one.
func (p parser) enum(name string, vals []string) string {
	if !p.has(name) {
		p.errs.Add(p.ptr+"/"+name, "required", "%s is required", name)
		return ""
	}
	return p.optEnum(name, vals)
}

func (p parser) optEnum(name string, vals []string) string {
	s := p.opt(name)
	if s == nil {
		return ""
	}
	if !slices.Contains(vals, *s) {
		p.errs.Add(p.ptr+"/"+name, "enum", "%s must be one of %s, not %q", name, strings.Join(vals, ", "), *s)
		return ""
	}
	return *s
}

func (p parser) has(name string) bool {
	v, ok := p.m[name]
	return ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null"))
}

// timestamp is an optional ISO-8601 member (RFC 3339, or a date).
func (p parser) timestamp(name string) *string {
	s := p.opt(name)
	if s == nil {
		return nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02"} {
		if _, err := time.Parse(layout, *s); err == nil {
			return s
		}
	}
	p.errs.Add(p.ptr+"/"+name, "format", "%s must be an ISO-8601 timestamp, not %q", name, *s)
	return nil
}

// refs is an optional list of identifiers, as KXM's idRefs: an array of
// non-empty, distinct strings, at most MaxRefs of them.
func (p parser) refs(m map[string]json.RawMessage, name, ptr string) []string {
	v, ok := m[name]
	if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return nil
	}
	var refs []string
	if err := json.Unmarshal(v, &refs); err != nil {
		p.errs.Add(ptr+"/"+name, "type", "%s must be an array of identifiers", name)
		return nil
	}
	if len(refs) > MaxRefs {
		p.errs.Add(ptr+"/"+name, "too_many", "%s holds at most %d references, not %d", name, MaxRefs, len(refs))
	}
	seen := map[string]bool{}
	for i, r := range refs {
		switch t := strings.TrimSpace(r); {
		case t == "":
			p.errs.Add(fmt.Sprintf("%s/%s/%d", ptr, name, i), "required", "%s must contain non-empty identifiers", name)
		case seen[t]:
			p.errs.Add(fmt.Sprintf("%s/%s/%d", ptr, name, i), "duplicate", "%s contains %q twice", name, t)
		}
		seen[strings.TrimSpace(r)] = true
	}
	return refs
}

// provenance reads provenance.sourceType, sourceRef and derivedFrom;
// members it does not know are kept under provenance in keep. self says
// sourceRef named this very item in contextd.
func (p parser) provenance(project, key string, keep map[string]json.RawMessage) (source, ref string, derived []string, self bool) {
	raw, ok := p.m["provenance"]
	var m map[string]json.RawMessage
	if !ok || json.Unmarshal(raw, &m) != nil || m == nil {
		p.errs.Add(p.ptr+"/provenance", "required", "provenance must be an object with a sourceType")
		return "", "", nil, false
	}
	q := parser{m: m, ptr: p.ptr + "/provenance", errs: p.errs}
	source = q.enum("sourceType", sourceTypes)
	if r := q.optText("sourceRef", MaxSourceRef); r != nil {
		if strings.HasPrefix(*r, fmt.Sprintf("contextd:%s/%s@v", project, key)) {
			self = true
		} else {
			ref = *r
		}
	}
	derived = q.refs(m, "derivedFrom", q.ptr)
	rest := map[string]json.RawMessage{}
	for k, v := range m {
		if k != "sourceType" && k != "sourceRef" && k != "derivedFrom" {
			rest[k] = v
		}
	}
	if len(rest) > 0 {
		b, _ := json.Marshal(rest)
		keep["provenance"] = b
	}
	return source, ref, derived, self
}

// utf16Len is the length of s as JavaScript's String.length counts it.
func utf16Len(s string) int {
	n := 0
	for _, r := range s {
		n++
		if r >= 0x10000 {
			n++
		}
	}
	return n
}

// pointers maps contextd's members of an item write to the KXM members
// they came from, longest first, for the problems of an import.
var pointers = []struct{ from, to string }{
	{"/metadata/kxm/provenance", "/provenance"}, {"/metadata/kxm", ""},
	{"/provenance/source_ref", "/provenance/sourceRef"}, {"/provenance/derived_from", "/provenance/derivedFrom"},
	{"/source", "/provenance/sourceType"}, {"/content", "/summary"}, {"/state_key", "/stateKey"},
	{"/valid_from", "/validFrom"}, {"/valid_until", "/validUntil"}, {"/key", "/id"}, {"/trigger", "/status"},
}

// Pointer is the pointer of a problem of an import's item write (under
// /items/N) as a pointer into the KXM ContextItem sent: /items/0/valid_from
// is /items/0/validFrom, /items/0/content is /items/0/summary.
func Pointer(ptr string) string {
	rest, ok := strings.CutPrefix(ptr, "/items/")
	if !ok {
		return ptr
	}
	i := strings.IndexByte(rest, '/')
	if i < 0 {
		return ptr
	}
	item, member := ptr[:len("/items/")+i], rest[i:]
	for _, m := range pointers {
		if member == m.from || strings.HasPrefix(member, m.from+"/") {
			return item + m.to + member[len(m.from):]
		}
	}
	return ptr
}
