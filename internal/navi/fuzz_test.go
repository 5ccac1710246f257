package navi

import (
	"encoding/json"
	"testing"

	"github.com/contextd/contextd/internal/ctxtype"
)

// FuzzParse: Parse never panics; what it accepts marshals back to JSON it
// accepts as the same packet, maps to a valid key and source, and renders.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"source":"File","content":"x"}`,
		`{"id":"a b","source":{"Other":"t\"q"},"title":null,"content":" c ","priority":-1,"metadata":{"k":[1,2.5,"\ud83d\udc4d"]}}`,
		`[null,"File",null,"c",7,{}]`,
		`{"source":{"File":null},"content":"","unknown":{"\ud800":[]}}`,
		`{"source":"Nope","content":1,"priority":1e2}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := Parse(data)
		if err != nil {
			return
		}
		if !json.Valid(p.Metadata) {
			t.Fatalf("metadata %q is not JSON", p.Metadata)
		}
		raw, err := p.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		back, err := Parse(raw)
		if err != nil {
			t.Fatalf("%s does not parse back: %v", raw, err)
		}
		again, _ := back.MarshalJSON()
		if string(again) != string(raw) {
			t.Fatalf("round trip changed %s to %s", raw, again)
		}
		if k := Key(p); !ctxtype.ValidKey(k) {
			t.Fatalf("key %q is not valid", k)
		}
		it := ToItem(p)
		if !json.Valid(it.Metadata) {
			t.Fatalf("item metadata %q is not JSON", it.Metadata)
		}
		if _, ok := Render([]Packet{p}); !ok {
			t.Fatal("one packet renders")
		}
	})
}
