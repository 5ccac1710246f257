// Package kxm speaks KXM's formats (kontextmind/kxm, the formal packet and
// handoff seed): its ContextItem v1, which an item exports to with
// GET .../items/{key}?format=kxm and items:import reads. It is pure: a
// mapping of values.
package kxm

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/contextd/contextd/internal/ctxtype"
)

// MaxSummary is KXM's limit on a context item's summary, in characters.
const MaxSummary = 4000

// ContextItem is KXM's ContextItem (plugins/kxm/src/context.ts): exactly
// its members, camelCase, the optional ones left out when unset.
type ContextItem struct {
	ID           string     `json:"id"`
	Kind         string     `json:"kind"`
	Project      string     `json:"project"`
	Summary      string     `json:"summary"`
	Provenance   Provenance `json:"provenance"`
	Authority    string     `json:"authority"`
	Confidence   string     `json:"confidence"`
	StateKey     string     `json:"stateKey,omitempty"`
	ObservedAt   string     `json:"observedAt,omitempty"`
	ValidFrom    string     `json:"validFrom,omitempty"`
	ValidUntil   string     `json:"validUntil,omitempty"`
	Status       string     `json:"status,omitempty"`
	Supersedes   []string   `json:"supersedes,omitempty"`
	EvidenceRefs []string   `json:"evidenceRefs,omitempty"`
}

// Provenance is KXM's ContextProvenance.
type Provenance struct {
	SourceType  string   `json:"sourceType"`
	SourceRef   string   `json:"sourceRef,omitempty"`
	DerivedFrom []string `json:"derivedFrom,omitempty"`
}

// Kind maps an item kind to KXM's five: the kinds KXM lacks go to the
// nearest (instruction and decision are knowledge, a tool is a skill).
func Kind(kind string) string {
	switch kind {
	case "knowledge", "state", "episode", "skill", "evidence":
		return kind
	case "tool":
		return "skill"
	}
	return "knowledge"
}

// SourceType maps a source to KXM's seven.
func SourceType(source string) string {
	switch source {
	case "human", "user_selection", "steering":
		return "human"
	case "git", "workflow", "tool", "peer":
		return source
	case "external", "rag", "memory", "memory_search":
		return "external"
	}
	return "derived"
}

// grantFloor is KXM's AUTHORITY_GRANT_FLOOR: the most authority content of
// an origin may carry there.
var grantFloor = map[string]string{"human": "policy", "workflow": "policy", "git": "instruction",
	"peer": "evidence", "tool": "evidence", "external": "evidence", "derived": "evidence"}

var rank = map[string]int{"policy": 4, "instruction": 3, "evidence": 2, "hypothesis": 1}

// Export is a version as KXM's ContextItem: the key is the id; the content,
// cut at MaxSummary characters, the summary; the authority capped at KXM's
// grant floor for the mapped source (so KXM's parser accepts it: an item of
// source project, instruction here, is evidence there); sourceRef names the
// version (contextd:{project}/{key}@v{n}). Members KXM has and contextd
// keeps under metadata.kxm (observedAt, supersedes, evidenceRefs, status)
// come back from there.
func Export(v *ctxtype.Version) ContextItem {
	src := SourceType(v.Source)
	auth := v.Authority
	if rank[auth] > rank[grantFloor[src]] {
		auth = grantFloor[src]
	}
	item := ContextItem{
		ID: exportID(v.Key), Kind: Kind(v.Kind), Project: v.Project, Summary: cutUTF16(v.Content, MaxSummary),
		Provenance: Provenance{SourceType: src, SourceRef: fmt.Sprintf("contextd:%s/%s@v%d", v.Project, v.Key, v.Version),
			DerivedFrom: idRefs(v.Provenance.DerivedFrom)},
		Authority: auth, Confidence: v.Confidence, StateKey: v.StateKey, Status: "current",
	}
	if item.Kind == "state" && item.StateKey == "" {
		item.StateKey = item.ID // KXM's state items name their key
	}
	if v.ValidFrom != nil {
		item.ValidFrom = v.ValidFrom.UTC().Format(time.RFC3339Nano)
	}
	if v.ValidUntil != nil {
		item.ValidUntil = v.ValidUntil.UTC().Format(time.RFC3339Nano)
	}
	var meta struct {
		KXM struct {
			ID           string   `json:"id"`
			Project      string   `json:"project"`
			Status       string   `json:"status"`
			ObservedAt   string   `json:"observedAt"`
			Supersedes   []string `json:"supersedes"`
			EvidenceRefs []string `json:"evidenceRefs"`
		} `json:"kxm"`
	}
	if json.Unmarshal(v.Metadata, &meta) == nil {
		k := meta.KXM
		item.ObservedAt, item.Supersedes, item.EvidenceRefs = k.ObservedAt, idRefs(k.Supersedes), idRefs(k.EvidenceRefs)
		// What an import mapped comes back as it was: the id the key was
		// made from, the project KXM named, a proposal still pinned only.
		if k.ID != "" {
			item.ID = k.ID
		}
		if k.Project != "" {
			item.Project = k.Project
		}
		if k.Status == "proposed" && v.Trigger.PinnedOnly {
			item.Status = "proposed"
		}
	}
	return item
}

// exportID is a key as a KXM id: itself, or for a key longer than KXM's
// MaxID its first characters, "_" and 16 hex digits of its SHA-256 (an
// import of that id names another item: KXM cannot hold the key).
func exportID(key string) string {
	if len(key) <= MaxID {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return key[:MaxID-17] + "_" + hex.EncodeToString(sum[:8])
}

// idRefs is a list of identifiers as KXM's idRefs takes it: no empty or
// repeated ones, at most MaxRefs; nil for none.
func idRefs(refs []string) []string {
	var out []string
	for _, r := range refs {
		if t := strings.TrimSpace(r); t != "" && !slices.Contains(out, t) && len(out) < MaxRefs {
			out = append(out, t)
		}
	}
	return out
}

// cutUTF16 is s cut at n UTF-16 code units, as KXM's limits count (a
// character outside the BMP is two).
func cutUTF16(s string, n int) string {
	units := 0
	for j, r := range s {
		w := 1
		if r >= 0x10000 {
			w = 2
		}
		if units+w > n {
			return s[:j]
		}
		units += w
	}
	return s
}

// cut is s cut at n characters.
func cut(s string, n int) string {
	i := 0
	for j := range s {
		if i == n {
			return s[:j]
		}
		i++
	}
	return s
}
