package kxm_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/kxm"
)

// schemaChecker checks a JSON value against the subset of JSON Schema that
// KXM's handoff-manifest.schema.json uses (testdata holds it as published,
// with the one definition of common.schema.json it refers to): type,
// const, enum, required, properties, additionalProperties false, items,
// minLength, maxLength, pattern and $ref. A keyword it does not know fails
// the check, so the schema cannot grow past what it checks unnoticed.
type schemaChecker struct {
	docs map[string]map[string]any // by file name
}

func loadChecker(t *testing.T) schemaChecker {
	t.Helper()
	c := schemaChecker{docs: map[string]map[string]any{}}
	for _, name := range []string{"handoff-manifest.schema.json", "common.schema.json"} {
		raw, err := os.ReadFile(filepath.Join("testdata", name))
		require.NoError(t, err)
		var doc map[string]any
		require.NoError(t, json.Unmarshal(raw, &doc))
		c.docs[name] = doc
	}
	return c
}

var known = map[string]bool{"$schema": true, "$id": true, "$comment": true, "title": true, "$defs": true, "type": true, "const": true,
	"enum": true, "required": true, "properties": true, "additionalProperties": true, "items": true, "minLength": true,
	"maxLength": true, "pattern": true, "$ref": true}

// check appends to errs every place where v breaks schema s.
func (c schemaChecker) check(s map[string]any, v any, ptr string, errs *[]string) {
	fail := func(format string, args ...any) { *errs = append(*errs, ptr+": "+fmt.Sprintf(format, args...)) }
	for k := range s {
		if !known[k] {
			fail("the checker does not know keyword %s", k)
		}
	}
	if ref, ok := s["$ref"].(string); ok {
		file, frag, _ := strings.Cut(ref, "#")
		def := c.docs[file]
		for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
			def, _ = def[tok].(map[string]any)
		}
		if def == nil {
			fail("unresolved $ref %s", ref)
			return
		}
		c.check(def, v, ptr, errs)
	}
	if want, ok := s["const"]; ok && v != want {
		fail("must be %v, not %v", want, v)
	}
	if enum, ok := s["enum"].([]any); ok && !contains(enum, v) {
		fail("%v is not one of %v", v, enum)
	}
	if t, ok := s["type"]; ok && !typeIs(t, v) {
		fail("must be of type %v, not %T", t, v)
		return
	}
	switch x := v.(type) {
	case string:
		c.checkString(s, x, fail)
	case []any:
		if items, ok := s["items"].(map[string]any); ok {
			for i, el := range x {
				c.check(items, el, fmt.Sprintf("%s/%d", ptr, i), errs)
			}
		}
	case map[string]any:
		c.checkObject(s, x, ptr, errs, fail)
	}
}

func (c schemaChecker) checkString(s map[string]any, x string, fail func(string, ...any)) {
	n := float64(utf8.RuneCountInString(x))
	if min, ok := s["minLength"].(float64); ok && n < min {
		fail("shorter than %v", min)
	}
	if max, ok := s["maxLength"].(float64); ok && n > max {
		fail("longer than %v", max)
	}
	if p, ok := s["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(x) {
		fail("%q does not match %s", x, p)
	}
}

func (c schemaChecker) checkObject(s map[string]any, x map[string]any, ptr string, errs *[]string, fail func(string, ...any)) {
	props, _ := s["properties"].(map[string]any)
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if _, ok := x[r.(string)]; !ok {
				fail("required member %s is missing", r)
			}
		}
	}
	keys := make([]string, 0, len(x))
	for k := range x {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		sub, ok := props[k].(map[string]any)
		if !ok {
			if s["additionalProperties"] == false {
				fail("member %s is not allowed (additionalProperties false)", k)
			}
			continue
		}
		c.check(sub, x[k], ptr+"/"+k, errs)
	}
}

func typeIs(t any, v any) bool {
	if ts, ok := t.([]any); ok {
		for _, one := range ts {
			if typeIs(one, v) {
				return true
			}
		}
		return false
	}
	switch t {
	case "string":
		_, ok := v.(string)
		return ok
	case "boolean":
		_, ok := v.(bool)
		return ok
	case "integer":
		f, ok := v.(float64)
		return ok && f == float64(int64(f))
	case "number":
		_, ok := v.(float64)
		return ok
	case "array":
		_, ok := v.([]any)
		return ok
	case "object":
		_, ok := v.(map[string]any)
		return ok
	case "null":
		return v == nil
	}
	return false
}

func contains(list []any, v any) bool {
	for _, el := range list {
		if el == v {
			return true
		}
	}
	return false
}

// validate is the list of what breaks KXM's schema in m, as JSON.
func (c schemaChecker) validate(t *testing.T, m any) []string {
	t.Helper()
	raw, err := json.Marshal(m)
	require.NoError(t, err)
	var v any
	require.NoError(t, json.Unmarshal(raw, &v))
	var errs []string
	c.check(c.docs["handoff-manifest.schema.json"], v, "", &errs)
	return errs
}

// TestSchemaCheckerCatches: the checker refuses what the schema forbids,
// so its silence below means something.
func TestSchemaCheckerCatches(t *testing.T) {
	c := loadChecker(t)
	raw, err := os.ReadFile(filepath.Join("testdata", "kxm-handoff-manifest.json"))
	require.NoError(t, err)
	var good map[string]any
	require.NoError(t, json.Unmarshal(raw, &good))
	require.Empty(t, c.validate(t, good), "KXM's own manifest is valid")
	for name, spoil := range map[string]func(m map[string]any){
		"missing member":  func(m map[string]any) { delete(m, "workflowRunId") },
		"extra member":    func(m map[string]any) { m["summary"] = "x" },
		"extra in source": func(m map[string]any) { m["source"].(map[string]any)["agent_id"] = "x" },
		"bad enum":        func(m map[string]any) { m["status"] = "withdrawn" },
		"bad const":       func(m map[string]any) { m["schema"] = "kxm.handoff-manifest.v2" },
		"empty id":        func(m map[string]any) { m["handoffId"] = "" },
		"too long":        func(m map[string]any) { m["baseCommit"] = strings.Repeat("a", 65) },
		"not an integer":  func(m map[string]any) { m["verificationEvidence"].(map[string]any)["witnessExitCode"] = 1.5 },
		"bad timestamp":   func(m map[string]any) { m["createdAt"] = "2026-01-14 09:41:27" },
		"artifact kind": func(m map[string]any) {
			m["deliverables"].(map[string]any)["artifacts"].([]any)[0].(map[string]any)["kind"] = "log"
		},
		"null not allowed": func(m map[string]any) { m["openQuestions"] = nil },
	} {
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m))
		spoil(m)
		require.NotEmpty(t, c.validate(t, m), name)
	}
}

// TestExportManifestIsValid: an exported manifest is valid against KXM's
// published schema, from a handoff with every member, from one with only
// what contextd requires, and from one over KXM's lengths.
func TestExportManifestIsValid(t *testing.T) {
	c := loadChecker(t)
	at := time.Date(2026, 1, 14, 9, 41, 27, 318_000_000, time.FixedZone("CET", 3600))
	code, passed, prev := 2, false, "hnd_prev"
	full := kxm.Manifest{TaskID: "T-1", WorkflowRunID: "run-1", ReworkOf: &prev,
		Source: kxm.ManifestSource{Role: "implementer", AgentID: "agt_1", Harness: "pi", Model: "m", StepID: "s", AttemptID: "a"},
		Target: kxm.ManifestTarget{Role: "critic", Permission: "edit"}, Intent: "dispatch_fix", BaseCommit: "abc", CandidateTreeHash: "def",
		Deliverables: kxm.ManifestDeliverables{Patches: []string{"p"}, Artifacts: []kxm.ManifestArtifact{{Name: "n", ArtifactRef: "r"}}},
		VerificationEvidence: kxm.ManifestEvidence{WitnessExitCode: &code, WitnessPassed: &passed,
			CriticVerdicts: []kxm.ManifestVerdict{{Critic: "c", Verdict: "FAIL", Summary: "why"}}},
		OpenQuestions: []string{"q"}, SuggestedNextStep: &kxm.ManifestNextStep{Action: "fix"}}
	minimal := kxm.Manifest{TaskID: "T-2", Target: kxm.ManifestTarget{Role: "critic"}, Intent: "request_review",
		Source: kxm.ManifestSource{Role: "implementer", AgentID: "agt_1"}}
	long := minimal
	long.BaseCommit, long.Source.Harness, long.WorkflowRunID = strings.Repeat("é", 100), strings.Repeat("h", 70), strings.Repeat("r", 200)
	export := func(m kxm.Manifest, status string) kxm.Manifest {
		m.HandoffID, m.Status = "hnd_abc", status
		return kxm.ExportManifest(m, at)
	}
	for name, h := range map[string]kxm.Manifest{"full": full, "minimal": minimal, "long": long} {
		for _, status := range []string{"pending", "accepted", "rejected", "superseded"} {
			m := export(h, status)
			require.Empty(t, c.validate(t, m), "%s %s", name, status)
			require.Equal(t, status, m.Status)
		}
	}
	w := export(full, "withdrawn")
	require.Empty(t, c.validate(t, w), "a withdrawn handoff is a manifest KXM accepts")
	require.Equal(t, "superseded", w.Status, "KXM has no withdrawn: a withdrawal is superseded there, as before")
	m := export(minimal, "pending")
	require.Equal(t, "2026-01-14T08:41:27.318Z", m.CreatedAt, "UTC, as KXM writes it")
	require.Equal(t, kxm.MissingText, m.WorkflowRunID)
	require.Equal(t, kxm.MissingText, m.Source.Harness)
	require.Equal(t, kxm.DefaultPermission, m.Target.Permission)
	require.Equal(t, kxm.NoWitness, *m.VerificationEvidence.WitnessExitCode)
	require.False(t, *m.VerificationEvidence.WitnessPassed)
	require.Nil(t, m.ReworkOf)
	require.Equal(t, 64, utf8.RuneCountInString(export(long, "pending").BaseCommit), "cut to KXM's length")
}

// TestCheckManifest: KXM's own manifest passes, with a warning for its
// handoffId; handoffId, status and createdAt never refuse, whatever their
// JSON; what KXM's schema refuses is refused with pointers into the
// manifest. (Its mapping onto contextd's handoff and back, unchanged but
// for what contextd sets, is internal/server's: TestHandoffMappersGolden,
// TestHandoffKXMManifestRoundTrip.)
func TestCheckManifest(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "kxm-handoff-manifest.json"))
	require.NoError(t, err)
	var in kxm.ManifestInput
	require.NoError(t, json.Unmarshal(raw, &in))
	warnings, err := kxm.CheckManifest(in)
	require.NoError(t, err)
	require.Len(t, warnings, 1)
	require.Equal(t, "kxm_handoff_id_replaced", warnings[0].Code)

	in.Status, in.HandoffID, in.CreatedAt = json.RawMessage(`{"odd":1}`), json.RawMessage(`42`), json.RawMessage(`false`)
	warnings, err = kxm.CheckManifest(in)
	require.NoError(t, err, "handoffId, status and createdAt never refuse")
	require.Len(t, warnings, 2)

	in.Schema, in.BaseCommit = "kxm.handoff-manifest.v2", strings.Repeat("a", 65)
	_, err = kxm.CheckManifest(in)
	require.ErrorContains(t, err, "/schema")
	require.ErrorContains(t, err, "/baseCommit")
}

func TestManifestPointer(t *testing.T) {
	for in, want := range map[string]string{
		"/task_id": "/taskId", "/verification_evidence/critic_verdicts/0/verdict": "/verificationEvidence/criticVerdicts/0/verdict",
		"/deliverables/artifacts/3/artifact_ref": "/deliverables/artifacts/3/artifactRef", "/source/agent_id": "/source/agentId",
		"/intent": "/intent", "": "", "project": "project",
	} {
		require.Equal(t, want, kxm.ManifestPointer(in), in)
	}
}
