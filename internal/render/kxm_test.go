package render

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
)

// rule is one node of the subset of JSON Schema that KXM's
// schemas/context-packet.schema.json uses: type, required, properties,
// additionalProperties (false, or a rule for every other member), items,
// enum, const, minimum, minLength, maxLength and pattern.
type rule struct {
	typ        string // object, array, string, integer, boolean; "" any
	required   []string
	props      map[string]*rule
	closed     bool  // additionalProperties: false
	additional *rule // additionalProperties: a rule
	items      *rule
	enum       []string
	constant   string
	minimum    *int
	minLen     int
	maxLen     int // 0: none
	pattern    *regexp.Regexp
}

func ptrInt(n int) *int { return &n }

func str(minLen, maxLen int) *rule { return &rule{typ: "string", minLen: minLen, maxLen: maxLen} }
func enum(vs ...string) *rule      { return &rule{enum: vs} }
func arr(items *rule) *rule        { return &rule{typ: "array", items: items} }
func integer(minimum int) *rule    { return &rule{typ: "integer", minimum: ptrInt(minimum)} }
func obj(required []string, props map[string]*rule) *rule {
	return &rule{typ: "object", required: required, props: props, closed: true}
}

// timestamp is common.schema.json#/$defs/timestamp.
var timestamp = &rule{typ: "string", pattern: regexp.MustCompile(`^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?Z$`)}

// kxmPacketSchema is KXM's context-packet.schema.json as read from
// kontextmind/kxm, rule for rule.
var kxmPacketSchema = obj(
	[]string{"schema", "packetId", "project", "generatedAt", "targetRole", "task", "acceptanceCriteria", "plan", "predecessors", "environment", "budget"},
	map[string]*rule{
		"schema":      {constant: "kxm.context-packet.v2"},
		"packetId":    str(1, 128),
		"project":     str(1, 128),
		"generatedAt": timestamp,
		"targetRole":  str(1, 64),
		"task": obj([]string{"taskId", "stepId", "stepAttempt", "objective", "allowedOutcomes", "permissionCeiling"}, map[string]*rule{
			"taskId": str(1, 128), "stepId": str(1, 64), "stepAttempt": integer(1), "objective": str(1, 4000),
			"allowedOutcomes": arr(str(1, 64)), "permissionCeiling": enum("read-only", "edit", "admin"),
		}),
		"acceptanceCriteria": arr(obj([]string{"id", "description", "verificationKind", "required"}, map[string]*rule{
			"id": str(1, 64), "description": str(1, 1000), "verificationKind": enum("gate", "witness", "critic", "human"),
			"targetRef": str(0, 256), "required": {typ: "boolean"},
		})),
		"plan": obj([]string{"planHash", "activeStepIndex", "totalSteps", "settledDecisions"}, map[string]*rule{
			"planHash": str(1, 128), "activeStepIndex": integer(0), "totalSteps": integer(1), "settledDecisions": arr(str(0, 500)),
		}),
		"predecessors": arr(obj([]string{"stepId", "role", "status", "summary", "settledAt", "artifacts", "decisions"}, map[string]*rule{
			"stepId": str(1, 64), "role": str(1, 64), "status": enum("passed", "warning", "failed", "settled"),
			"summary": str(0, 4000), "settledAt": timestamp,
			"artifacts": arr(obj([]string{"name", "kind", "artifactRef"}, map[string]*rule{
				"name": str(0, 256), "kind": enum("patch", "report", "log", "plan", "repro_script", "doc"),
				"artifactRef": str(0, 256), "contentSnippet": str(0, 8000),
			})),
			"decisions": arr(str(0, 500)),
		})),
		"environment": obj([]string{"sharedDefaults", "projectKnowledge", "currentState", "contradictions", "activeSkills"}, map[string]*rule{
			"sharedDefaults":   arr(obj([]string{"id", "summary"}, map[string]*rule{"id": {typ: "string"}, "summary": {typ: "string"}})),
			"projectKnowledge": arr(&rule{typ: "object"}),
			"currentState":     arr(&rule{typ: "object"}),
			"contradictions":   arr(&rule{typ: "object"}),
			"activeSkills":     arr(&rule{typ: "object"}),
		}),
		"budget": obj([]string{"allocatedTokens", "estimatedTokens", "unresolvedGaps", "provenanceSummary"}, map[string]*rule{
			"allocatedTokens": integer(1), "estimatedTokens": integer(0), "unresolvedGaps": arr(&rule{typ: "string"}),
			"provenanceSummary": {typ: "object", additional: &rule{typ: "integer"}},
		}),
	})

// kxmContextItem is KXM's ContextItem as its parseContextItem accepts it
// (plugins/kxm/src/context.ts): the environment's item arrays hold these.
var kxmContextItem = obj([]string{"id", "kind", "project", "summary", "provenance", "authority", "confidence"}, map[string]*rule{
	"id": str(1, 128), "kind": enum("evidence", "state", "episode", "knowledge", "skill"), "project": str(1, 200),
	"summary": str(1, 4000), "authority": enum("policy", "instruction", "evidence", "hypothesis"),
	"confidence": enum("verified", "probable", "uncertain"),
	"provenance": obj([]string{"sourceType"}, map[string]*rule{
		"sourceType": enum("human", "git", "workflow", "tool", "peer", "external", "derived"),
		"sourceRef":  str(1, 512), "derivedFrom": arr(str(1, 0)),
	}),
	"stateKey": str(1, 200), "observedAt": {typ: "string"}, "validFrom": timestamp, "validUntil": timestamp,
	"status": enum("current", "superseded", "proposed", "rejected"), "supersedes": arr(str(1, 0)), "evidenceRefs": arr(str(1, 0)),
})

// check validates v against r, adding a message per violation.
func (r *rule) check(path string, v any, errs *[]string) {
	bad := func(f string, a ...any) { *errs = append(*errs, path+": "+fmt.Sprintf(f, a...)) }
	if r.constant != "" && v != r.constant {
		bad("want const %q, got %v", r.constant, v)
	}
	if r.enum != nil {
		s, _ := v.(string)
		ok := false
		for _, e := range r.enum {
			ok = ok || s == e
		}
		if !ok {
			bad("%v is not one of %v", v, r.enum)
		}
	}
	switch r.typ {
	case "object":
		m, ok := v.(map[string]any)
		if !ok {
			bad("want an object, got %T", v)
			return
		}
		for _, k := range r.required {
			if _, ok := m[k]; !ok {
				bad("required member %q missing", k)
			}
		}
		for k, el := range m {
			switch sub, ok := r.props[k]; {
			case ok:
				sub.check(path+"/"+k, el, errs)
			case r.additional != nil:
				r.additional.check(path+"/"+k, el, errs)
			case r.closed:
				bad("member %q is not allowed", k)
			}
		}
	case "array":
		a, ok := v.([]any)
		if !ok {
			bad("want an array, got %T", v)
			return
		}
		for i, el := range a {
			r.items.check(fmt.Sprintf("%s/%d", path, i), el, errs)
		}
	case "string":
		s, ok := v.(string)
		if !ok {
			bad("want a string, got %T", v)
			return
		}
		if n := utf8.RuneCountInString(s); n < r.minLen || (r.maxLen > 0 && n > r.maxLen) {
			bad("length %d outside [%d, %d]", n, r.minLen, r.maxLen)
		}
		if r.pattern != nil && !r.pattern.MatchString(s) {
			bad("%q does not match %s", s, r.pattern)
		}
	case "integer":
		n, ok := v.(json.Number)
		if !ok || strings.ContainsAny(n.String(), ".eE") {
			bad("want an integer, got %v", v)
			return
		}
		if i, _ := n.Int64(); r.minimum != nil && i < int64(*r.minimum) {
			bad("%d is below the minimum %d", i, *r.minimum)
		}
	case "boolean":
		if _, ok := v.(bool); !ok {
			bad("want a boolean, got %T", v)
		}
	}
}

// validateKXM decodes text and checks it against the packet schema and
// every environment item against KXM's ContextItem; it returns the decoded
// document.
func validateKXM(t *testing.T, text string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	var doc any
	require.NoError(t, dec.Decode(&doc), "the kxm format is one JSON document:\n%s", text)
	require.False(t, dec.More(), "nothing follows the document")
	var errs []string
	kxmPacketSchema.check("", doc, &errs)
	if m, ok := doc.(map[string]any); ok {
		env, _ := m["environment"].(map[string]any)
		for _, k := range []string{"projectKnowledge", "currentState", "contradictions", "activeSkills"} {
			items, _ := env[k].([]any)
			for i, it := range items {
				kxmContextItem.check(fmt.Sprintf("/environment/%s/%d", k, i), it, &errs)
				if im, _ := it.(map[string]any); im["kind"] == "state" {
					if im["stateKey"] == nil || im["status"] == nil {
						errs = append(errs, fmt.Sprintf("/environment/%s/%d: a state item needs stateKey and status", k, i))
					}
				}
			}
		}
	}
	require.Empty(t, errs, "the document breaks KXM's schema:\n%s", text)
	return doc.(map[string]any)
}

// TestKXMValidator: the validator itself rejects what the schema rejects,
// so that its silence on a packet means something.
func TestKXMValidator(t *testing.T) {
	t.Parallel()
	good := Text(Render(ctxtype.KXM, &Doc{Project: "p", TargetRole: "r", Sections: map[string][]Entry{}, Allocated: 10}))
	validateKXM(t, good)
	for name, breakIt := range map[string]func(m map[string]any){
		"missing task":      func(m map[string]any) { delete(m, "task") },
		"extra member":      func(m map[string]any) { m["extra"] = true },
		"bad schema":        func(m map[string]any) { m["schema"] = "kxm.context-packet.v1" },
		"bad status":        func(m map[string]any) { m["predecessors"] = []any{map[string]any{"status": "accepted"}} },
		"attempt zero":      func(m map[string]any) { m["task"].(map[string]any)["stepAttempt"] = json.Number("0") },
		"empty step":        func(m map[string]any) { m["task"].(map[string]any)["stepId"] = "" },
		"bad time":          func(m map[string]any) { m["generatedAt"] = "2026-01-01 00:00:00" },
		"gap not a string":  func(m map[string]any) { m["budget"].(map[string]any)["unresolvedGaps"] = []any{json.Number("1")} },
		"provenance string": func(m map[string]any) { m["budget"].(map[string]any)["provenanceSummary"] = map[string]any{"k": "x"} },
		"item without kind": func(m map[string]any) {
			m["environment"].(map[string]any)["activeSkills"] = []any{map[string]any{"id": "x"}}
		},
		"shared extra field": func(m map[string]any) {
			m["environment"].(map[string]any)["sharedDefaults"] = []any{map[string]any{"id": "x", "summary": "s", "k": 1}}
		},
	} {
		dec := json.NewDecoder(strings.NewReader(good))
		dec.UseNumber()
		var m map[string]any
		require.NoError(t, dec.Decode(&m))
		breakIt(m)
		var errs []string
		kxmPacketSchema.check("", m, &errs)
		env := m["environment"].(map[string]any)
		for _, it := range env["activeSkills"].([]any) {
			kxmContextItem.check("/environment/activeSkills", it, &errs)
		}
		require.NotEmpty(t, errs, name)
	}
}

var kxmT0 = time.Date(2026, 11, 29, 12, 0, 0, 123456000, time.UTC)

func kxmVersion(project, key, kind, source, content string) *ctxtype.Version {
	return &ctxtype.Version{Project: project, Key: key, Version: 3, Fields: ctxtype.Fields{Kind: kind, Source: source, Content: content,
		Authority: "policy", Confidence: "verified", Metadata: json.RawMessage(`{}`)}}
}

// richKXMDoc has every part the kxm format writes, with a request that
// lacks what KXM requires (no step, attempt 0, no plan hash, no steps) and
// values past KXM's limits.
func richKXMDoc() *Doc {
	settled := kxmT0.Add(-time.Hour)
	exit := 0
	e := func(ref int, v *ctxtype.Version, title string) Entry {
		return Entry{Ref: ref, Key: v.Key, Version: v.Version, Source: v.Source, Title: title, Content: v.Content, V: v}
	}
	state := kxmVersion("acme", "deploy.state", "state", "tool", "Staging is frozen.")
	loser := kxmVersion("acme", "refund.old", "knowledge", "human", "Refunds within 14 days.")
	loser.StateKey = "refund.window"
	d := &Doc{Project: "acme", TargetRole: "critic", PacketID: "ctxpkt_abc", GeneratedAt: kxmT0, Allocated: 900, Used: 321,
		Gaps: []string{"budget: acme/big v1"},
		Task: &Task{TaskID: "T-42", StepAttempt: 0, Objective: "Review.", AllowedOutcomes: []string{"approve", ""}, PermissionCeiling: ""}, TaskRef: 0, ObjectiveRef: 1,
		Criteria: []Criterion{{ID: "AC1", Description: "", VerificationKind: "critic", Required: true}}, CriteriaRef: 2,
		Plan: &Plan{ActiveStepIndex: 2, SettledDecisions: []string{strings.Repeat("d", 600)}}, PlanRef: 3,
		Predecessors: []Predecessor{
			{Ref: 4, ID: "hnd_1", SourceRole: "implementer", Status: "accepted", StepID: "implement", Summary: "Done.", SettledAt: &settled,
				Artifacts: []ctxtype.Artifact{{Name: "p", Kind: "patch", Ref: "a/p.diff", Snippet: "+x"}, {Name: "n", Kind: "notes", Ref: "r"}},
				Patches:   []string{"sha:1"}, Reports: []string{"r.md"}, WitnessExitCode: &exit},
			{Ref: 5, ID: "hnd_2", Status: "superseded", Withdrawn: true, Reason: "wrong branch", Summary: strings.Repeat("s", 5000)},
			{Ref: 6, ID: "hnd_3", SourceRole: "x", Status: "pending", StepID: strings.Repeat("z", 70)},
		},
		AgentContext: map[string]any{"branch": "feat/refunds"}, AgentContextRef: 7,
		Sections: map[string][]Entry{
			SharedDefaults:   {e(8, kxmVersion("_shared", "style", "knowledge", "human", "Be concise."), "Style")},
			ProjectKnowledge: {e(9, kxmVersion("acme", "rules", "decision", "project", strings.Repeat("r", 4100)), ""), e(10, kxmVersion("acme", "ep", "episode", "peer", "Yesterday."), "")},
			CurrentState:     {e(11, state, "")},
			ActiveSkills:     {e(12, kxmVersion("acme", "review", "skill", "git", "Read twice."), "Reviewing")},
			Tools:            {e(13, kxmVersion("acme", "tests", "tool", "tool", "Runs tests."), "run_tests")},
		},
		Contradictions: []Contradiction{{Ref: 14, StateKey: "refund.window", Kept: Entry{Key: "refund.window", Version: 2},
			Dropped: Entry{Key: loser.Key, Version: 1, V: loser}, KeptAuthority: "policy", DroppedAuthority: "evidence"}},
	}
	return d
}

// TestKXMRich: a document with every part is valid against KXM's schema,
// the request's gaps are filled with the documented defaults, statuses are
// mapped, and every record's piece is exactly its part of the document.
func TestKXMRich(t *testing.T) {
	t.Parallel()
	d := richKXMDoc()
	pieces := Render(ctxtype.KXM, d)
	text := Text(pieces)
	doc := validateKXM(t, text)
	require.Equal(t, text, Text(Render(ctxtype.KXM, richKXMDoc())), "same Doc, same bytes")

	require.Equal(t, "ctxpkt_abc", doc["packetId"])
	require.Equal(t, "2026-11-29T12:00:00.123456Z", doc["generatedAt"])
	task := doc["task"].(map[string]any)
	require.Equal(t, KXMUnspecified, task["stepId"])
	require.Equal(t, json.Number("1"), task["stepAttempt"])
	require.Equal(t, "read-only", task["permissionCeiling"])
	require.Equal(t, []any{"approve"}, task["allowedOutcomes"])
	plan := doc["plan"].(map[string]any)
	require.Equal(t, KXMUnspecified, plan["planHash"])
	require.Equal(t, json.Number("3"), plan["totalSteps"], "totalSteps reaches past the active step")
	require.Equal(t, "AC1", doc["acceptanceCriteria"].([]any)[0].(map[string]any)["description"])
	preds := doc["predecessors"].([]any)
	var statuses []any
	for _, p := range preds {
		statuses = append(statuses, p.(map[string]any)["status"])
	}
	require.Equal(t, []any{"passed", "failed", "warning"}, statuses)
	p0 := preds[0].(map[string]any)
	require.Equal(t, "2026-11-29T11:00:00.123456Z", p0["settledAt"])
	require.Len(t, p0["artifacts"], 4, "two artifacts, a patch and a report")
	require.Equal(t, "doc", p0["artifacts"].([]any)[1].(map[string]any)["kind"])
	require.Equal(t, "2026-11-29T12:00:00.123456Z", preds[2].(map[string]any)["settledAt"], "pending: the packet's time")
	require.Equal(t, KXMUnspecified, preds[1].(map[string]any)["role"])
	require.Contains(t, preds[1].(map[string]any)["summary"], "s", "cut, not dropped")

	env := doc["environment"].(map[string]any)
	ids := func(k string) []any {
		var out []any
		for _, it := range env[k].([]any) {
			out = append(out, it.(map[string]any)["id"])
		}
		return out
	}
	require.Equal(t, []any{"style"}, ids("sharedDefaults"))
	require.Equal(t, []any{"rules"}, ids("projectKnowledge"))
	require.Equal(t, []any{KXMAgentContextID, "ep", "deploy.state"}, ids("currentState"), "host state first, episode and state by KXM's builder")
	require.Equal(t, []any{"review", "tests"}, ids("activeSkills"))
	require.Equal(t, []any{"refund.old"}, ids("contradictions"))
	con := env["contradictions"].([]any)[0].(map[string]any)
	require.Equal(t, "rejected", con["status"])
	require.Equal(t, "refund.window", con["stateKey"])
	require.Equal(t, "policy", con["authority"], "a human's item keeps policy authority")
	tool := env["activeSkills"].([]any)[1].(map[string]any)
	require.Equal(t, "evidence", tool["authority"], "a tool's item is capped at evidence")
	require.Equal(t, "run_tests: Runs tests.", tool["summary"])
	require.Equal(t, "deploy.state", env["currentState"].([]any)[2].(map[string]any)["stateKey"], "a state item without a key gets its key")

	budget := doc["budget"].(map[string]any)
	require.Equal(t, json.Number("900"), budget["allocatedTokens"])
	require.Equal(t, json.Number("321"), budget["estimatedTokens"])
	require.Equal(t, []any{"budget: acme/big v1"}, budget["unresolvedGaps"])
	require.Equal(t, map[string]any{"knowledge": json.Number("2"), "episode": json.Number("1"), "state": json.Number("1"), "skill": json.Number("2")},
		budget["provenanceSummary"])

	checkKXMPieces(t, d, pieces)
}

// checkKXMPieces: the pieces cover the text once, each record has at most
// one piece, and each piece is the JSON of exactly its part: a member
// "name":value for a request part, one array element for the rest.
func checkKXMPieces(t *testing.T, d *Doc, pieces []Piece) {
	t.Helper()
	seen := map[int]string{}
	for _, p := range pieces {
		if p.Ref == Scaffold {
			continue
		}
		_, dup := seen[p.Ref]
		require.False(t, dup, "record %d has one piece", p.Ref)
		seen[p.Ref] = p.Text
	}
	member := func(ref int, name string) {
		if txt, ok := seen[ref]; ok {
			require.True(t, strings.HasPrefix(txt, `"`+name+`":`), "record %d is the %s member: %s", ref, name, txt)
			var v any
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(txt, `"`+name+`":`)), &v))
		}
	}
	member(d.TaskRef, "task")
	member(d.CriteriaRef, "acceptanceCriteria")
	member(d.PlanRef, "plan")
	if _, ok := seen[d.ObjectiveRef]; d.Task != nil && ok {
		t.Fatalf("the objective is inside the task's piece, not a piece of its own")
	}
	element := func(ref int, what string, check func(m map[string]any)) {
		txt, ok := seen[ref]
		require.True(t, ok, "%s (record %d) has a piece", what, ref)
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(txt), &m), "%s's piece is one object: %s", what, txt)
		check(m)
	}
	for _, p := range d.Predecessors {
		element(p.Ref, "predecessor "+p.ID, func(m map[string]any) {
			require.Equal(t, kxmOr(p.StepID, 64), m["stepId"])
			require.Equal(t, kxmPredecessorStatus(p), m["status"])
		})
	}
	if d.AgentContext != nil {
		element(d.AgentContextRef, "agent context", func(m map[string]any) {
			require.Equal(t, KXMAgentContextID, m["id"])
			require.Contains(t, m["summary"], AgentContextText(d.AgentContext)[:5])
		})
	}
	for _, sec := range SectionOrder {
		for _, e := range d.Sections[sec] {
			element(e.Ref, "entry "+e.Key, func(m map[string]any) {
				require.Equal(t, e.Key, m["id"])
				require.Contains(t, m["summary"], kxmCut(e.Content, 100))
			})
		}
	}
	for _, c := range d.Contradictions {
		element(c.Ref, "contradiction "+c.Dropped.Key, func(m map[string]any) {
			require.Equal(t, c.Dropped.Key, m["id"])
			require.Equal(t, c.StateKey, m["stateKey"])
		})
	}
}

// TestKXMRandomDocs: documents of random parts, many missing, are all
// valid, deterministic, and their pieces are their records' parts.
func TestKXMRandomDocs(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(3, 4))
	words := []string{"a", "<b>", "ü", "\"q\"", "line\nbreak", "", " ", "tab\t", "😀"}
	word := func() string { return words[rng.IntN(len(words))] + words[rng.IntN(len(words))] }
	kinds := []string{"knowledge", "state", "episode", "skill", "tool", "decision", "evidence", "instruction"}
	sources := []string{"human", "project", "git", "tool", "peer", "rag", "weird"}
	for iter := range 300 {
		d := &Doc{Project: "acme", TargetRole: word() + "r", Sections: map[string][]Entry{}, Allocated: rng.IntN(3), Used: rng.IntN(100000),
			GeneratedAt: kxmT0.Add(time.Duration(rng.IntN(1e9))), PacketID: []string{"", "ctxpkt_1"}[rng.IntN(2)]}
		ref := 0
		next := func() int { ref++; return ref }
		if rng.IntN(2) == 0 {
			d.Task = &Task{TaskID: word(), StepID: word(), StepAttempt: rng.IntN(3), Objective: word(), AllowedOutcomes: []string{word()},
				PermissionCeiling: []string{"", "edit", "admin", "read-only"}[rng.IntN(4)]}
			d.TaskRef, d.ObjectiveRef = next(), next()
		}
		if rng.IntN(2) == 0 {
			d.Plan = &Plan{PlanHash: word(), ActiveStepIndex: rng.IntN(3), TotalSteps: rng.IntN(3)}
			d.PlanRef = next()
		}
		for range rng.IntN(3) {
			d.Predecessors = append(d.Predecessors, Predecessor{Ref: next(), Status: []string{"pending", "accepted", "rejected", "superseded", "x"}[rng.IntN(5)],
				StepID: word(), SourceRole: word(), Summary: word(), Decisions: []string{word()}, Artifacts: []ctxtype.Artifact{{Name: word(), Kind: word(), Ref: word()}}})
		}
		for range rng.IntN(8) {
			project := []string{"acme", "_shared"}[rng.IntN(2)]
			v := kxmVersion(project, fmt.Sprintf("k%d", ref), kinds[rng.IntN(len(kinds))], sources[rng.IntN(len(sources))], "c"+word())
			sec := SectionOrder[rng.IntN(len(SectionOrder))]
			d.Sections[sec] = append(d.Sections[sec], Entry{Ref: next(), Key: v.Key, Version: 1, Title: word(), Content: v.Content, V: v})
		}
		pieces := Render(ctxtype.KXM, d)
		text := Text(pieces)
		validateKXM(t, text)
		checkKXMPieces(t, d, pieces)
		require.Equal(t, text, Text(Render(ctxtype.KXM, d)), "iteration %d", iter)
		require.True(t, utf8.ValidString(text))
	}
}
