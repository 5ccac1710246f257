package assemble

import (
	"encoding/json"
	"reflect"
	"sort"
	"testing"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/token"
)

// FuzzRender: whatever an item holds, its packet keeps the invariants, in
// every format, twice over.
func FuzzRender(f *testing.F) {
	f.Add("Title", "line one\nline two\n", "{\"a\":[]}", uint8(0))
	f.Add("", "\r\n\n  trailing  \n\n", "{}", uint8(1))
	f.Add("ü ✓ \"quoted\"", "```\ncode\n```", "{\"x\":{\"y\":null}}", uint8(2))
	f.Fuzz(func(t *testing.T, title, content, agentCtx string, format uint8) {
		if content == "" {
			return
		}
		r := &ctxtype.Request{TargetRole: "implementer", Format: []ctxtype.Format{ctxtype.Markdown, ctxtype.Blocks, ctxtype.JSON, ctxtype.Navi}[format%4], TokenBudget: 4000}
		var ctx map[string]any
		if json.Unmarshal([]byte(agentCtx), &ctx) == nil {
			r.AgentContext = ctx
		}
		if r.Normalize() != nil {
			return
		}
		v := &ctxtype.Version{Project: "acme", Key: "k", Version: 1, Fields: ctxtype.Fields{Kind: "knowledge", Source: "project",
			Title: title, Content: content, Authority: "evidence", Confidence: "probable", Slot: "system", Trigger: ctxtype.Trigger{Always: true}}}
		in := Input{Project: "acme", Request: r, Candidates: []Candidate{{Version: v}}, Now: t0}
		a, err := Assemble(in)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Assemble(in)
		if err != nil {
			t.Fatal(err)
		}
		if a.Rendered != b.Rendered || !reflect.DeepEqual(a.Records, b.Records) {
			t.Fatal("same input, different output")
		}
		if n, _ := token.Count(r.Tokenizer, a.Rendered); n != a.Used {
			t.Fatalf("used %d, text counts %d", a.Used, n)
		}
		var spans []ctxtype.Span
		for _, rec := range a.Records {
			if rec.Span != nil {
				spans = append(spans, *rec.Span)
			}
		}
		sort.Slice(spans, func(i, j int) bool { return spans[i].Start < spans[j].Start })
		end := 0
		for _, sp := range spans {
			if sp.Start < end || sp.End > len(a.Rendered) || sp.Start >= sp.End {
				t.Fatalf("bad or overlapping span %+v", sp)
			}
			end = sp.End
		}
		if r.Format == ctxtype.JSON {
			var doc any
			if err := json.Unmarshal([]byte(a.Rendered), &doc); err != nil {
				t.Fatalf("json format is not JSON: %v\n%s", err, a.Rendered)
			}
		}
	})
}
