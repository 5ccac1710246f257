package item

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/keyword"
	"github.com/contextd/contextd/internal/limits"
	"github.com/contextd/contextd/internal/validation"
)

// ValidKind reports whether kind is an item kind.
func ValidKind(kind string) bool { return kinds[kind] }

// ValidSource reports whether source is in the vocabulary or other:<tag>.
func ValidSource(source string) bool { return sources[source] || otherTagRE.MatchString(source) }

// ValidKey reports whether key may name an item.
func ValidKey(key string) bool { return ctxtype.ValidKey(key) }

// maxTitle, maxStateKey and maxTool are an item's title, state key and
// trigger tool, in characters (api/openapi.yaml's maxLength): fixed, as a
// key's 200 are. A state key and a tool are in index entries, which hold
// at most 2,704 bytes (00041).
const (
	maxTitle    = 1000
	maxStateKey = 200
	maxTool     = 200
)

var (
	kinds       = set("knowledge", "state", "episode", "skill", "decision", "instruction", "evidence", "tool")
	authorities = set("policy", "instruction", "evidence", "hypothesis")
	confidences = set("verified", "probable", "uncertain")
	slots       = set("system", "messages", "tools")
	// sources is the open vocabulary of the seeds; anything else is other:<tag>.
	sources = set("file", "project", "user_selection", "canvas_node", "study_block", "focus_thread",
		"material_excerpt", "session_summary", "decision", "memory_search", "rag", "memory", "steering",
		"human", "git", "workflow", "tool", "peer", "external", "derived")
	otherTagRE = regexp.MustCompile(`^other:[A-Za-z0-9._-]{1,64}$`)
)

func set(vals ...string) map[string]bool {
	m := make(map[string]bool, len(vals))
	for _, v := range vals {
		m[v] = true
	}
	return m
}

// Input is an item write as a client sent it: nil means omitted, and an
// omitted field takes its default (a PUT is a full replacement).
type Input struct {
	Key        string
	Kind       *string
	Source     *string
	Title      *string
	Summary    *string
	Content    string
	Priority   *int32
	Authority  *string
	Confidence *string
	StateKey   *string
	ValidFrom  *string
	ValidUntil *string
	Slot       *string
	Trigger    *ctxtype.Trigger
	Roles      *ctxtype.Roles
	Template   *bool
	Metadata   json.RawMessage
	Provenance *ctxtype.Provenance
	// Propose asks that the write be stored as a proposal, which another
	// principal promotes (docs/proposals.md), not as a version.
	Propose bool
}

func str(p *string, def string) string {
	if p == nil {
		return def
	}
	return *p
}

// normalize validates in and applies defaults. prefix is the JSON Pointer of
// the item in its request ("" for a PUT body, "/items/3" in a batch).
func (in *Input) normalize(prefix string, errs *validation.List) ctxtype.Fields {
	// An omitted authority stays empty: its default depends on the writer
	// (DefaultAuthority), which the write path applies.
	f := ctxtype.Fields{
		Kind:       str(in.Kind, "knowledge"),
		Source:     str(in.Source, "project"),
		Title:      str(in.Title, ""),
		Summary:    str(in.Summary, ""),
		Content:    in.Content,
		Authority:  str(in.Authority, ""),
		Confidence: str(in.Confidence, "probable"),
		StateKey:   str(in.StateKey, ""),
		Slot:       str(in.Slot, "system"),
		Trigger:    ctxtype.Trigger{Always: true},
		Roles:      ctxtype.Roles{VisibleTo: []string{}, HiddenFrom: []string{}},
		Metadata:   json.RawMessage(`{}`),
		Provenance: ctxtype.Provenance{DerivedFrom: []string{}},
	}
	if in.Priority != nil {
		f.Priority = int(*in.Priority)
	}
	if in.Template != nil {
		f.Template = *in.Template
	}
	enum := func(field, val string, allowed map[string]bool, list string) {
		if !allowed[val] {
			errs.Add(prefix+"/"+field, "enum", "%s must be one of %s, not %s", field, list, validation.QuoteShort(val))
		}
	}
	enum("kind", f.Kind, kinds, "knowledge, state, episode, skill, decision, instruction, evidence, tool")
	if in.Authority != nil {
		enum("authority", f.Authority, authorities, "policy, instruction, evidence, hypothesis")
	}
	enum("confidence", f.Confidence, confidences, "verified, probable, uncertain")
	enum("slot", f.Slot, slots, "system, messages, tools")
	if !sources[f.Source] && !otherTagRE.MatchString(f.Source) {
		errs.Add(prefix+"/source", "enum", "source must be one of the seed vocabulary (file, project, user_selection, ..., derived) or other:<tag>, not %s", validation.QuoteShort(f.Source))
	}
	for _, fv := range [][2]string{{"title", f.Title}, {"summary", f.Summary}, {"content", f.Content}, {"state_key", f.StateKey}, {"source", f.Source}} {
		if field, val := fv[0], fv[1]; strings.ContainsRune(val, 0) {
			errs.Add(prefix+"/"+field, "format", "%s must not contain NUL characters", field)
		}
	}
	if strings.TrimSpace(f.Content) == "" {
		errs.Add(prefix+"/content", "required", "content is required and must not be blank")
	}
	l := limits.Get()
	limits.Bytes(errs, prefix+"/content", len(f.Content), l.Content)
	limits.Chars(errs, prefix+"/summary", f.Summary, l.Summary)
	// In characters, as api/openapi.yaml's maxLength and the other limits.
	limits.Chars(errs, prefix+"/title", f.Title, maxTitle)
	limits.Chars(errs, prefix+"/state_key", f.StateKey, maxStateKey)
	parseTime := func(field string, p *string) *time.Time {
		if p == nil {
			return nil
		}
		t, err := time.Parse(time.RFC3339Nano, *p)
		if err != nil {
			errs.Add(prefix+"/"+field, "format", "%s must be an RFC 3339 time, not %s", field, validation.QuoteShort(*p))
			return nil
		}
		t = t.UTC()
		if t.Year() < 1 || t.Year() > 9999 {
			// JSON (RFC 3339) and the stored answer know years 1 to 9999 only.
			errs.Add(prefix+"/"+field, "range", "%s must fall in the years 0001 to 9999 in UTC, not %s", field, validation.QuoteShort(*p))
			return nil
		}
		return &t
	}
	f.ValidFrom = parseTime("valid_from", in.ValidFrom)
	f.ValidUntil = parseTime("valid_until", in.ValidUntil)
	if f.ValidFrom != nil && f.ValidUntil != nil && !f.ValidFrom.Before(*f.ValidUntil) {
		errs.Add(prefix+"/valid_until", "range", "valid_until must be after valid_from")
	}
	if in.Trigger != nil {
		f.Trigger = normalizeTrigger(in.Trigger, prefix+"/trigger", errs)
	}
	if in.Roles != nil {
		f.Roles = ctxtype.Roles{VisibleTo: nonNil(in.Roles.VisibleTo), HiddenFrom: nonNil(in.Roles.HiddenFrom)}
		checkStrings(prefix+"/roles/visible_to", f.Roles.VisibleTo, errs)
		checkStrings(prefix+"/roles/hidden_from", f.Roles.HiddenFrom, errs)
		for _, fr := range []struct {
			field string
			roles []string
		}{{"visible_to", f.Roles.VisibleTo}, {"hidden_from", f.Roles.HiddenFrom}} {
			field, roles := fr.field, fr.roles
			limits.Items(errs, prefix+"/roles/"+field, len(roles), l.List)
			for i, r := range roles {
				limits.Chars(errs, fmt.Sprintf("%s/roles/%s/%d", prefix, field, i), r, l.Role)
			}
		}
	}
	if in.Provenance != nil {
		f.Provenance = normalizeProvenance(prefix+"/provenance", in.Provenance, errs)
	}
	if len(in.Metadata) > 0 && !bytes.Equal(bytes.TrimSpace(in.Metadata), []byte("null")) {
		f.Metadata = normalizeMetadata(prefix+"/metadata", in.Metadata, errs)
	}
	return f
}

// normalizeProvenance checks a provenance against the text and list
// limits, as every other short text and list.
func normalizeProvenance(pointer string, in *ctxtype.Provenance, errs *validation.List) ctxtype.Provenance {
	l := limits.Get()
	p := ctxtype.Provenance{SourceRef: in.SourceRef, DerivedFrom: nonNil(in.DerivedFrom)}
	limits.Chars(errs, pointer+"/source_ref", p.SourceRef, l.Text)
	checkStrings(pointer+"/derived_from", p.DerivedFrom, errs)
	limits.Items(errs, pointer+"/derived_from", len(p.DerivedFrom), l.List)
	for i, d := range p.DerivedFrom {
		limits.Chars(errs, fmt.Sprintf("%s/derived_from/%d", pointer, i), d, l.Text)
	}
	return p
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func checkStrings(pointer string, vals []string, errs *validation.List) {
	for i, v := range vals {
		if strings.TrimSpace(v) == "" {
			errs.Add(fmt.Sprintf("%s/%d", pointer, i), "required", "must not be blank")
		}
	}
}

func normalizeTrigger(t *ctxtype.Trigger, pointer string, errs *validation.List) ctxtype.Trigger {
	n := 0
	out := ctxtype.Trigger{}
	if t.Always {
		out.Always = true
		n++
	}
	if t.Keywords != nil {
		n++
		if len(t.Keywords) == 0 {
			errs.Add(pointer+"/keywords", "required", "keywords must list at least one keyword")
		}
		l := limits.Get()
		limits.Items(errs, pointer+"/keywords", len(t.Keywords), l.Keywords)
		for i, k := range t.Keywords {
			limits.Chars(errs, fmt.Sprintf("%s/keywords/%d", pointer, i), k, l.Keyword)
			if len(keyword.Words(k)) == 0 {
				errs.Add(fmt.Sprintf("%s/keywords/%d", pointer, i), "required", "a keyword needs at least one word (letters, digits or _); %s could never match", validation.QuoteShort(k))
			}
		}
		out.Keywords = t.Keywords
	}
	out.Match = normalizeMatch(t, pointer, errs)
	if t.Tool != nil {
		n++
		if strings.TrimSpace(*t.Tool) == "" {
			errs.Add(pointer+"/tool", "required", "tool must name a tool")
		}
		limits.Chars(errs, pointer+"/tool", *t.Tool, maxTool)
		out.Tool = t.Tool
	}
	if t.PinnedOnly {
		out.PinnedOnly = true
		n++
	}
	if t.Relevance {
		out.Relevance = true
		n++
	}
	if n != 1 {
		errs.Add(pointer, "invalid", `trigger must be exactly one of {"always":true}, {"keywords":[...]}, {"tool":"name"}, {"pinned_only":true}, {"relevance":true}`)
	}
	return out
}

// normalizeMatch is the stored form of a trigger's match: "" for whole
// words (however it was spelt), ctxtype.MatchStem for stems. Only keyword
// triggers have one.
func normalizeMatch(t *ctxtype.Trigger, pointer string, errs *validation.List) string {
	switch t.Match {
	case "":
		return ""
	case "word", ctxtype.MatchStem:
	default:
		errs.Add(pointer+"/match", "enum", "match must be one of word, stem, not %s", validation.QuoteShort(t.Match))
		return ""
	}
	if t.Keywords == nil {
		errs.Add(pointer+"/match", "invalid", "match applies to keyword triggers only")
		return ""
	}
	if t.Match == "word" {
		return ""
	}
	return t.Match
}

// normalizeMetadata checks that raw is a JSON object without credential-like
// keys (at any depth) and returns it in canonical form (sorted keys), so
// that equal metadata hashes equally.
func normalizeMetadata(pointer string, raw json.RawMessage, errs *validation.List) json.RawMessage {
	// The limit is on the canonical form, which is what is stored and what
	// a read answers, so metadata that was written can always be written
	// back as it was read (a client's read-modify-write), however the
	// client spelled it: <, > and & are read as \u003c and the like, six
	// bytes each, and numbers as jsonb prints them (CheckDocument). What is
	// sent is refused before it is decoded when it is far over: its size
	// is the work.
	max := limits.Get().Metadata
	if len(raw) > metadataSpread*max {
		errs.Add(pointer, "too_long", "metadata may be at most %d bytes as stored, and %d as sent; this is %d bytes as sent", max, metadataSpread*max, len(raw))
		return json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		errs.Add(pointer, "format", "metadata must be a JSON object")
		return json.RawMessage(`{}`)
	}
	doc, ok := v.(map[string]any)
	if !ok {
		errs.Add(pointer, "type", "metadata must be a JSON object")
		return json.RawMessage(`{}`)
	}
	// Credential-like keys and nesting are refused as in agent_context
	// (the depth limit): what a write stores, every reader decodes.
	if !ctxtype.CheckDocument(errs, pointer, doc, limits.Get().Depth, "metadata key") {
		return json.RawMessage(`{}`)
	}
	out, err := json.Marshal(v)
	if err != nil {
		errs.Add(pointer, "format", "metadata cannot be encoded: %v", err)
		return json.RawMessage(`{}`)
	}
	if len(out) > max {
		limits.Bytes(errs, pointer, len(out), max)
		return json.RawMessage(`{}`)
	}
	if bytes.Contains(out, []byte(`\u0000`)) {
		errs.Add(pointer, "format", "metadata must not contain NUL characters")
	}
	return out
}

// metadataSpread is how much longer than the limit sent metadata may be
// before it is refused undecoded: a character sent as a \uXXXX escape (6
// bytes) is at least one byte stored. (White space has no such bound; past
// this it is refused as sent.)
const metadataSpread = 6
