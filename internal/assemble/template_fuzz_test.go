package assemble

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/render"
)

// refFill is fillTemplate written out by hand: at each "{{", optional
// ASCII white space, a name ([A-Za-z_][A-Za-z0-9_.]*), optional white
// space and "}}" make a placeholder; scanning goes on after it (a value is
// never filled again), and anything else is copied as it is.
func refFill(s string, vars map[string]string) (string, []string) {
	space := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' }
	nameStart := func(c byte) bool { return c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' }
	nameRest := func(c byte) bool { return nameStart(c) || c == '.' || c >= '0' && c <= '9' }
	var b strings.Builder
	var missing []string
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], "{{") {
			j := i + 2
			for j < len(s) && space(s[j]) {
				j++
			}
			if j < len(s) && nameStart(s[j]) {
				k := j + 1
				for k < len(s) && nameRest(s[k]) {
					k++
				}
				name := s[j:k]
				for k < len(s) && space(s[k]) {
					k++
				}
				if strings.HasPrefix(s[k:], "}}") {
					if v, ok := vars[name]; ok {
						b.WriteString(v)
					} else {
						b.WriteString(s[i : k+2])
						if !slices.Contains(missing, name) {
							missing = append(missing, name)
						}
					}
					i = k + 2
					continue
				}
			}
		}
		b.WriteByte(s[i])
		i++
	}
	return b.String(), missing
}

// FuzzTemplate: filling a template never panics, gives the same text and
// the same missing names twice, and agrees with a hand-written scanner;
// in a packet, a template item whose placeholders all have values shows
// its filled text, byte-identical across two assemblies, and one with a
// hole is left out as template_unresolved, never shown.
func FuzzTemplate(f *testing.F) {
	f.Add("Refunds for {{project}}", "As of {{now}}, {{ customer.name }} gets {{days}} days.\n{{task.objective}}",
		[]byte(`{"customer.name":"Ada","days":14,"flag":true,"nested":{"b":[1.50,null]},"none":null}`), "Ship it.")
	f.Add("", "{{{now}}} {{ now}} {{now }} {{\tnow\n}} {{1x}} {{x-y}} {{}} {{now", []byte(`{}`), "")
	f.Add("{{missing}}", "x", []byte(`{"project":"spoof","target_role":"spoof","now":"spoof"}`), "")
	f.Add("t", "{{a}}{{b}}{{a}}", []byte(`{"a":"{{b}}","b":"{{a}}"}`), "obj")
	f.Add("中文 {{名}}", "👍🏽 {{v}} \xff", []byte(`{"v":"ü\u2028","名":"x"}`), "{{now}}")
	f.Fuzz(func(t *testing.T, title, content string, variables []byte, objective string) {
		if len(title)+len(content)+len(variables)+len(objective) > 8192 || strings.TrimSpace(content) == "" {
			return
		}
		raw := `{"target_role":"implementer","token_budget":200000,"task":{"objective":` + render.JSONString(objective) + `}`
		if len(variables) > 0 {
			raw += `,"variables":` + string(variables)
		}
		r, err := ctxtype.DecodeRequest([]byte(raw + "}"))
		if err != nil || r.Normalize() != nil {
			return
		}
		in := Input{Project: "acme", Request: r, Now: t0}
		vars := templateVars(in, r)
		if !reflect.DeepEqual(vars, templateVars(in, r)) {
			t.Fatal("template variables differ twice")
		}
		if vars["project"] != "acme" || vars["target_role"] != r.TargetRole || vars["now"] != t0.Format(time.RFC3339) {
			t.Fatalf("a variable overrode a built-in: %v", vars)
		}
		var wantMissing []string
		filled := [2]string{}
		for i, s := range []string{title, content} {
			got, missing := fillTemplate(s, vars, wantMissing)
			again, _ := fillTemplate(s, vars, wantMissing)
			want, refMissing := refFill(s, vars)
			if got != again || got != want {
				t.Fatalf("fillTemplate(%q) = %q, again %q, by hand %q", s, got, again, want)
			}
			for _, m := range refMissing {
				if !slices.Contains(wantMissing, m) {
					wantMissing = append(wantMissing, m)
				}
			}
			if !reflect.DeepEqual(missing, wantMissing) {
				t.Fatalf("fillTemplate(%q) misses %q, by hand %q", s, missing, wantMissing)
			}
			filled[i] = got
		}

		v := &ctxtype.Version{Project: "acme", Key: "tmpl", Version: 1, Fields: ctxtype.Fields{Kind: "knowledge", Source: "project",
			Title: title, Content: content, Authority: "evidence", Confidence: "probable", Slot: "system",
			Trigger: ctxtype.Trigger{Always: true}, Template: true}}
		in.Candidates = []Candidate{{Version: v}}
		a, err := Assemble(in)
		if err != nil {
			t.Fatal(err)
		}
		b, err := Assemble(in)
		if err != nil {
			t.Fatal(err)
		}
		if a.Rendered != b.Rendered || !reflect.DeepEqual(a.Records, b.Records) {
			t.Fatal("same template, different packets")
		}
		var rec *ctxtype.Record
		for i := range a.Records {
			if a.Records[i].SubjectKey == "tmpl" {
				rec = &a.Records[i]
			}
		}
		if rec == nil {
			t.Fatal("the template item has no record")
		}
		if len(wantMissing) > 0 {
			if rec.Decision != ctxtype.Excluded || rec.Reason != ctxtype.ReasonTemplateUnresolved || rec.Span != nil {
				t.Fatalf("a template missing %q is %s (%s)", wantMissing, rec.Decision, rec.Reason)
			}
			return
		}
		if rec.Decision == ctxtype.Excluded {
			t.Fatalf("a filled template is left out: %s %s", rec.Reason, rec.Detail)
		}
		if block := render.MarkdownItemBlock(filled[0], filled[1]); rec.Span == nil || a.Rendered[rec.Span.Start:rec.Span.End] != block {
			t.Fatalf("the template's span does not hold its filled block %q:\n%s", block, a.Rendered)
		}
	})
}
