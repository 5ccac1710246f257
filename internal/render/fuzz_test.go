package render

import (
	"bytes"
	"encoding/json"
	"github.com/contextd/contextd/internal/ctxtype"
	"reflect"
	"strings"
	"testing"
)

// fuzzDoc builds a Doc that uses every part of the layout from a few
// texts; flags leave parts out. Every record has a Ref of its own.
func fuzzDoc(project, role, objective, title, content, snippet string, agentCtx map[string]any, flags uint8) *Doc {
	exit, passed := int(flags)-128, flags&1 != 0
	e := func(ref int, key string) Entry {
		return Entry{Ref: ref, Key: key, Version: ref, Source: "project", Priority: ref * 10, Title: title, Content: content}
	}
	d := &Doc{
		Project: project, TargetRole: role,
		Task: &Task{TaskID: title, StepID: role, StepAttempt: int(flags), Objective: objective,
			AllowedOutcomes: []string{"done", title}, PermissionCeiling: "edit"},
		TaskRef: 0, ObjectiveRef: 1,
		Criteria:    []Criterion{{ID: "c1", Description: objective, VerificationKind: "test", TargetRef: snippet, Required: flags&2 != 0}},
		CriteriaRef: 2,
		Plan:        &Plan{PlanHash: title, ActiveStepIndex: int(flags % 7), TotalSteps: int(flags % 5), SettledDecisions: []string{content}},
		PlanRef:     3,
		Predecessors: []Predecessor{{Ref: 4, ID: "hnd_1", SourceRole: role, TargetRole: "critic", Status: "accepted",
			StepID: title, AttemptID: "2", Summary: content, Decisions: []string{objective},
			Artifacts:       []ctxtype.Artifact{{Name: title, Kind: "patch", Ref: "git:abc", Snippet: snippet}},
			Verdicts:        []ctxtype.Verdict{{Critic: role, Verdict: "PASS", Summary: snippet}},
			WitnessExitCode: &exit, WitnessPassed: &passed}},
		AgentContext: agentCtx, AgentContextRef: 5,
		Sections: map[string][]Entry{
			SharedDefaults: {e(6, "shared.style")},
			CurrentState:   {e(7, "state.scene")},
			ActiveSkills:   {e(8, "skill.cut")},
			Tools:          {e(9, "tool.search")},
			Messages:       {e(10, "msg.hello")},
		},
		Contradictions: []Contradiction{{Ref: 11, StateKey: title, Kept: e(12, "k.kept"), Dropped: e(13, "k.dropped"),
			KeptAuthority: "policy", DroppedAuthority: "hypothesis"}},
	}
	for _, sec := range SectionOrder {
		d.Ranked = append(d.Ranked, d.Sections[sec]...)
	}
	if flags&4 != 0 {
		d.Task = nil
	}
	if flags&8 != 0 {
		d.Plan, d.Criteria, d.Predecessors = nil, nil, nil
	}
	if flags&16 != 0 {
		d.Contradictions = nil
	}
	return d
}

// FuzzRenderDoc: whatever the texts, every format renders without
// panicking, the same bytes twice; the pieces are not empty, scaffolding
// is merged, each record owns at most one piece, and an entry's piece is
// exactly what the budget priced for it (EntryCost, ContradictionCost).
// The json format is one JSON document holding the texts as given.
func FuzzRenderDoc(f *testing.F) {
	f.Add("acme", "implementer", "Ship the refund flow.\n\nKeep it small.", "Refund policy", "Refunds within 14 days.\r\n- no questions\n\n",
		"Run:\n```sh\nmake test\n```", []byte(`{"projectId":"p1","mediaAssets":[],"playbackTimeMs":1.50e3}`), uint8(0))
	f.Add("", " ", "   ", "", "x", "", []byte(`null`), uint8(255))
	f.Add("p", "critic\nrole", "中文文本，更多内容。", "👍🏽 ✓ \"quoted\" `code`", "```\ncode\n```\n````", "````\n~~~\n",
		[]byte(`{"scene":{"id":"s1","clips":[{"id":"c1","t":[1,2]}]},"HTTPServers":[],"n":12345678901234567890}`), uint8(5))
	f.Add("p\xff", "r\xc3\x28", "\xe2\x82 objective", "title\x00", "content \xf0\x28\x8c\xbc", "\x1b[31m", []byte(`{"k\u2028":"v\u0000"}`), uint8(22))
	f.Fuzz(func(t *testing.T, project, role, objective, title, content, snippet string, agentCtx []byte, flags uint8) {
		if len(project)+len(role)+len(objective)+len(title)+len(content)+len(snippet)+len(agentCtx) > 16<<10 {
			return
		}
		var ctx map[string]any
		dec := json.NewDecoder(bytes.NewReader(agentCtx))
		dec.UseNumber()
		if dec.Decode(&ctx) != nil {
			ctx = nil
		}
		for _, format := range []ctxtype.Format{ctxtype.Markdown, ctxtype.Blocks, ctxtype.JSON, ctxtype.Navi} {
			d := fuzzDoc(project, role, objective, title, content, snippet, ctx, flags)
			a := Render(format, d)
			b := Render(format, fuzzDoc(project, role, objective, title, content, snippet, ctx, flags))
			if !reflect.DeepEqual(a, b) {
				t.Fatalf("%s: same doc, different pieces", format)
			}
			text := Text(a)
			if text != Text(b) {
				t.Fatalf("%s: same doc, different text", format)
			}
			owned := map[int]string{}
			for i, p := range a {
				if p.Text == "" {
					t.Fatalf("%s: empty piece %d", format, i)
				}
				if i > 0 && p.Ref == Scaffold && a[i-1].Ref == Scaffold {
					t.Fatalf("%s: adjacent scaffolding pieces %d and %d", format, i-1, i)
				}
				if p.Ref == Scaffold {
					continue
				}
				if p.Ref < 0 || p.Ref > 13 {
					t.Fatalf("%s: piece %d belongs to record %d, which the doc does not have", format, i, p.Ref)
				}
				if _, dup := owned[p.Ref]; dup {
					t.Fatalf("%s: record %d owns two pieces", format, p.Ref)
				}
				owned[p.Ref] = p.Text
			}
			for _, e := range d.Ranked {
				got, ok := owned[e.Ref]
				if !ok {
					t.Fatalf("%s: entry %s is not rendered", format, e.Key)
				}
				want := EntryCost(format, e)
				switch format {
				case ctxtype.Blocks, ctxtype.Navi:
					got += "\n"
				case ctxtype.JSON:
					got = "," + got + "\n"
				}
				if got != want {
					t.Fatalf("%s: entry %s rendered %q, priced %q", format, e.Key, got, want)
				}
			}
			for _, c := range d.Contradictions {
				got, ok := owned[c.Ref]
				if !ok {
					t.Fatalf("%s: contradiction is not rendered", format)
				}
				switch format {
				case ctxtype.Blocks:
					got += "\n"
				case ctxtype.JSON:
					got = "," + got + "\n"
				}
				if want := ContradictionCost(format, c); got != want {
					t.Fatalf("%s: contradiction rendered %q, priced %q", format, got, want)
				}
			}
			if format != ctxtype.JSON {
				continue
			}
			checkJSONPacket(t, d, text)
		}
	})
}

// checkJSONPacket decodes the json format and compares what it holds with
// the doc: the texts as encoding/json reads them back, the host's state
// with its numbers canonical.
func checkJSONPacket(t *testing.T, d *Doc, text string) {
	t.Helper()
	var got struct {
		Project      string         `json:"project"`
		TargetRole   string         `json:"target_role"`
		Objective    *string        `json:"objective"`
		AgentContext map[string]any `json:"agent_context"`
		Sections     []struct {
			Name    string `json:"name"`
			Entries []struct {
				Content, Title, Key *string
			} `json:"entries"`
		} `json:"sections"`
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal([]byte(text), &all); err != nil || !json.Valid([]byte(text)) {
		t.Fatalf("json format is not one JSON object: %v\n%s", err, text)
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("json format does not decode: %v", err)
	}
	valid := func(s string) string { return string([]rune(s)) }
	if got.Project != valid(d.Project) || got.TargetRole != valid(d.TargetRole) {
		t.Fatalf("project/role %q %q, want %q %q", got.Project, got.TargetRole, d.Project, d.TargetRole)
	}
	if d.Task != nil && strings.TrimSpace(d.Task.Objective) != "" && (got.Objective == nil || *got.Objective != valid(d.Task.Objective)) {
		t.Fatalf("objective %v, want %q", got.Objective, d.Task.Objective)
	}
	if d.AgentContext != nil && !reflect.DeepEqual(got.AgentContext, canonicalize(d.AgentContext)) {
		t.Fatalf("agent_context %v, want %v", got.AgentContext, canonicalize(d.AgentContext))
	}
	n := 0
	for _, sec := range got.Sections {
		for _, e := range sec.Entries {
			if e.Content == nil {
				continue // a contradiction
			}
			n++
			if *e.Content != valid(d.Ranked[0].Content) || *e.Title != valid(d.Ranked[0].Title) {
				t.Fatalf("entry %v holds %q, want %q", e.Key, *e.Content, d.Ranked[0].Content)
			}
		}
	}
	if n != len(d.Ranked) {
		t.Fatalf("json format holds %d entries, the doc %d", n, len(d.Ranked))
	}
}

// FuzzMarkdownItemBlock: the block's pieces join to the block; its lines
// (the odd pieces) are substrings of the content, as item writes rely on
// to count each line once; the separators are "\n" or "\n  "; and the block
// is one line per content line.
func FuzzMarkdownItemBlock(f *testing.F) {
	for _, s := range [][2]string{{"Title", "line one\nline two\n"}, {"", "\r\n\n  trailing  \n\n"}, {"  ", "a\r\r\nb\rc"},
		{"multi\nline title", "```go\nfunc main() {}\n```"}, {"中文", "内容\n\n\n更多"}, {"x", "\xff\n\xfe"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, title, content string) {
		pieces := MarkdownItemBlockPieces(title, content)
		block := MarkdownItemBlock(title, content)
		if strings.Join(pieces, "") != block || !reflect.DeepEqual(pieces, MarkdownItemBlockPieces(title, content)) {
			t.Fatal("pieces do not make the block, or differ twice")
		}
		if len(pieces)%2 != 1 || !strings.HasPrefix(pieces[0], "- ") || pieces[len(pieces)-1] != "\n" {
			t.Fatalf("pieces %q are not lead, lines and separators, final newline", pieces)
		}
		for i := 1; i < len(pieces)-1; i++ {
			p := pieces[i]
			if i%2 == 1 {
				if !strings.Contains(content, p) || strings.Contains(p, "\n") {
					t.Fatalf("line %q is not one line of the content %q", p, content)
				}
			} else if p != "\n" && p != "\n  " {
				t.Fatalf("separator %q", p)
			}
		}
		if strings.Count(block, "\n") != len(pieces)/2 {
			t.Fatalf("block %q has %d lines, content %d", block, strings.Count(block, "\n"), len(pieces)/2)
		}
	})
}

// plainNumber respells a JSON number as PostgreSQL's jsonb writes it back
// (no exponent, trailing zeros of the scale kept): the spellings a replay
// reads. ok is false when that is too long to write.
func plainNumber(n string) (string, bool) {
	neg := strings.HasPrefix(n, "-")
	n = strings.TrimPrefix(n, "-")
	mant, exp := n, 0
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		mant = n[:i]
		e := strings.TrimPrefix(n[i+1:], "+")
		sign := 1
		if strings.HasPrefix(e, "-") {
			sign, e = -1, e[1:]
		}
		e = strings.TrimLeft(e, "0")
		if len(e) > 3 {
			return "", false
		}
		for _, c := range e {
			exp = exp*10 + int(c-'0')
		}
		exp *= sign
	}
	frac := ""
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		mant, frac = mant[:i], mant[i+1:]
	}
	digits := mant + frac
	point := len(mant) + exp // the decimal point's place in digits
	switch {
	case point <= 0:
		digits = strings.Repeat("0", 1-point) + digits
		point = 1
	case point > len(digits):
		digits += strings.Repeat("0", point-len(digits))
	}
	intPart := strings.TrimLeft(digits[:point], "0")
	if intPart == "" {
		intPart = "0"
	}
	s := intPart
	if point < len(digits) {
		s += "." + digits[point:]
	}
	if neg && strings.Trim(s, "0.") != "" {
		s = "-" + s
	}
	return s, true
}

// FuzzCanonicalNumber: CanonicalNumber writes a JSON number, is a fixed
// point (canonical twice is canonical once), and, as its comment says, is
// the same for every spelling of the value, the database's included: 1e2,
// 100 and 100.0 write alike, so a replayed packet renders the same bytes.
func FuzzCanonicalNumber(f *testing.F) {
	for _, s := range []string{"1200", "1e2", "100.0", "12.5", "12345678901234567890", "-3", "0.1", "1E-7",
		"-0", "0.000", "9007199254740993", "-1.0e-400", "123456789012345678901234567890.5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 64 {
			return
		}
		var n json.Number
		if json.Unmarshal([]byte(s), &n) != nil || !json.Valid([]byte(s)) {
			return // not a JSON number
		}
		c := CanonicalNumber(n)
		if c != CanonicalNumber(n) {
			t.Fatal("not deterministic")
		}
		var back json.Number
		if json.Unmarshal([]byte(c), &back) != nil || !json.Valid([]byte(c)) {
			t.Fatalf("CanonicalNumber(%s) = %q is not a JSON number", s, c)
		}
		if again := CanonicalNumber(json.Number(c)); again != c {
			t.Fatalf("CanonicalNumber(%s) = %s, but CanonicalNumber(%s) = %s", s, c, c, again)
		}
		if p, ok := plainNumber(string(n)); ok {
			if pc := CanonicalNumber(json.Number(p)); pc != c {
				t.Fatalf("one value, two renderings: %s renders %s, its database spelling %s renders %s", n, c, p, pc)
			}
		}
	})
}
