package attribute

import (
	"reflect"
	"testing"
	"unicode/utf8"
)

// FuzzFind: Find never panics, answers the same twice and what it answered
// before Prepared (refFind), as does a Prepared asked first about half of
// the text; every match is a range of the rendered text on character
// boundaries; an exact match is the text itself, and a similarity lies in
// (0, 1].
func FuzzFind(f *testing.F) {
	f.Add(rendered, "Refunds within 30 days")
	f.Add(rendered, "- the REFUND window is 30 days for customers in the EU, and 21 days")
	f.Add("a_b _c_ __d__", "_c_")
	f.Add("\xff\xfe x", "x")
	f.Fuzz(func(t *testing.T, r, text string) {
		a, b := Find(r, text), Find(r, text)
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("two answers: %v and %v", a, b)
		}
		if ref := refFind(r, text); !reflect.DeepEqual(a, ref) {
			t.Fatalf("%v, before Prepared %v", a, ref)
		}
		p := Prepare(r)
		half := text[:len(text)/2]
		if got, ref := p.Find(half), refFind(r, half); !reflect.DeepEqual(got, ref) {
			t.Fatalf("half: %v, before Prepared %v", got, ref)
		}
		if got := p.Find(text); !reflect.DeepEqual(got, a) {
			t.Fatalf("prepared again: %v, alone %v", got, a)
		}
		if !utf8.ValidString(r) {
			return // a rendered prompt is PostgreSQL text, always UTF-8: character boundaries need it
		}
		for _, m := range a {
			if m.Start < 0 || m.End > len(r) || m.Start >= m.End {
				t.Fatalf("match %+v outside [0, %d)", m, len(r))
			}
			if !utf8.RuneStart(r[m.Start]) || (m.End < len(r) && !utf8.RuneStart(r[m.End])) {
				t.Fatalf("match %+v cuts a character", m)
			}
			if m.Kind == Exact && r[m.Start:m.End] != text {
				t.Fatalf("exact match %q is not %q", r[m.Start:m.End], text)
			}
			if m.Similarity <= 0 || m.Similarity > 1 {
				t.Fatalf("similarity %v", m.Similarity)
			}
		}
	})
}
