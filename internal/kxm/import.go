package kxm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

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
	// PinnedOnly: a proposed item, in a packet only when pinned.
	PinnedOnly bool
	// Retire: a superseded or rejected item, written and then tombstoned.
	Retire bool
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

// ParseItem reads one KXM ContextItem (raw, at JSON Pointer ptr of the
// request) for an import into project, adding every problem to errs. The
// values are checked by the item write's own validation afterwards; here
// only the shape: required members, JSON types, statuses. A provenance
// sourceRef that names this very item in contextd (as an export writes it)
// is contextd's own, not an origin, and is not kept.
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
	id := p.str("id", true)
	out := Imported{Key: ctxtype.KeyFor(id), Kind: p.str("kind", true), Content: p.str("summary", true),
		Authority: p.opt("authority"), Confidence: p.opt("confidence"), StateKey: p.opt("stateKey"),
		ValidFrom: p.opt("validFrom"), ValidUntil: p.opt("validUntil")}
	keep := map[string]json.RawMessage{}
	if id != "" && out.Key != id {
		keep["id"] = m["id"] // the key is a mapping of it; export gives the key
	}
	out.Source, out.SourceRef, out.DerivedFrom = p.provenance(project, out.Key, keep)
	status := p.str("status", false)
	switch status {
	case "", "current":
	case "proposed":
		out.PinnedOnly = true
	case "superseded", "rejected":
		out.Retire = true
	default:
		errs.Add(ptr+"/status", "enum", "status must be one of %s, not %q", strings.Join(Statuses, ", "), status)
	}
	for k, v := range m {
		if !homes[k] && !reserved[k] && !(k == "project" && jsonIs(v, project)) {
			keep[k] = v
		}
	}
	if errs.Len() > before {
		return Imported{}
	}
	out.Metadata = metadata(keep)
	return out
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

func (p parser) str(name string, required bool) string {
	s := p.opt(name)
	if s == nil {
		if required {
			p.errs.Add(p.ptr+"/"+name, "required", "%s is required", name)
		}
		return ""
	}
	if required && *s == "" {
		p.errs.Add(p.ptr+"/"+name, "required", "%s must not be empty", name)
	}
	return *s
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

// provenance reads provenance.sourceType, sourceRef and derivedFrom;
// members it does not know are kept under provenance in keep.
func (p parser) provenance(project, key string, keep map[string]json.RawMessage) (source, ref string, derived []string) {
	raw, ok := p.m["provenance"]
	var m map[string]json.RawMessage
	if !ok || json.Unmarshal(raw, &m) != nil || m == nil {
		p.errs.Add(p.ptr+"/provenance", "required", "provenance must be an object with a sourceType")
		return "", "", nil
	}
	q := parser{m: m, ptr: p.ptr + "/provenance", errs: p.errs}
	source = q.str("sourceType", true)
	if r := q.opt("sourceRef"); r != nil && !strings.HasPrefix(*r, fmt.Sprintf("contextd:%s/%s@v", project, key)) {
		ref = *r
	}
	if v, ok := m["derivedFrom"]; ok && !bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		if err := json.Unmarshal(v, &derived); err != nil {
			p.errs.Add(q.ptr+"/derivedFrom", "type", "derivedFrom must be an array of strings")
		}
	}
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
	return source, ref, derived
}
