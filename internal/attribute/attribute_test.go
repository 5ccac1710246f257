package attribute

import (
	"testing"
)

const rendered = "# Context Packet\n\n### Project Knowledge\n- **Refunds** within 30 days need a receipt.\n" +
	"- The refund window is 30 days for customers in the EU, and 14 days for customers anywhere else in the world.\n" +
	"- Use `snake_case` names: café ordering.\n"

func TestFind(t *testing.T) {
	for _, c := range []struct {
		text, kind string
		want       []string // the rendered text of each match
		similarity float64
	}{
		{"need a receipt", Exact, []string{"need a receipt"}, 1},
		{"refunds within 30 DAYS need a receipt", Normalized, []string{"Refunds** within 30 days need a receipt"}, 1},
		{"Refunds within\n   30 days", Normalized, []string{"Refunds** within 30 days"}, 1},
		{"- Refunds within 30 days", Normalized, []string{"Refunds** within 30 days"}, 1},
		{"snake_case names", Normalized, []string{"snake_case` names"}, 1},
		{"_café_ ordering", Normalized, []string{"café ordering"}, 1},
		{"cafe\u0301 ordering", Normalized, []string{"café ordering"}, 1}, // NFD in the quote
		{"The refund window is 30 days for customers in the EU, and 21 days for customers anywhere else in the world.", Passage,
			[]string{"The refund window is 30 days for customers in the EU, and", "days for customers anywhere else in the world"}, 0},
	} {
		got := Find(rendered, c.text)
		if len(got) == 0 {
			t.Fatalf("%q: no match", c.text)
		}
		for i, m := range got {
			if m.Kind != c.kind {
				t.Fatalf("%q: kind %s, want %s", c.text, m.Kind, c.kind)
			}
			if i < len(c.want) && rendered[m.Start:m.End] != c.want[i] {
				t.Fatalf("%q: match %d is %q, want %q", c.text, i, rendered[m.Start:m.End], c.want[i])
			}
		}
		if c.kind == Passage {
			// 12 and 8 of the quote's 21 words.
			if len(got) != 2 || got[0].Similarity != 0.571 || got[1].Similarity != 0.381 {
				t.Fatalf("%q: passages %+v", c.text, got)
			}
		}
	}
	if ms := Find(rendered, "entirely unrelated words about nothing at all in this place"); ms != nil {
		t.Fatalf("shares nothing, found %+v", ms)
	}
	if ms := Find(rendered, "the refund window is"); ms == nil || ms[0].Kind != Normalized {
		t.Fatalf("fewer than eight words still match in sequence: %+v", ms)
	}
	if ms := Find(rendered, "window refund the is 30"); ms != nil {
		t.Fatalf("out of order and short: %+v", ms)
	}
}
