package kxm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/validation"
)

// FuzzParseItem: any bytes give either problems or an item whose key is a
// valid key and whose metadata is a JSON object; never a panic.
func FuzzParseItem(f *testing.F) {
	f.Add(`{"id":"ctx-1","kind":"knowledge","project":"p","summary":"A fact.","provenance":{"sourceType":"human"},"authority":"policy","confidence":"verified"}`)
	f.Add(`{"id":"a/b c","kind":"state","summary":"x","provenance":{"sourceType":"git","sourceRef":"contextd:p/a@v1","x":1},"authority":"evidence","confidence":"probable","stateKey":"k","status":"superseded","supersedes":["z"]}`)
	f.Add(`{"id":"","kind":7,"summary":null,"provenance":[],"token":"t"}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, raw string) {
		var errs validation.List
		got := ParseItem(json.RawMessage(raw), "p", "/items/0", &errs)
		if errs.Len() > 0 {
			return
		}
		if !ctxtype.ValidKey(got.Key) {
			t.Fatalf("key %q of %q is not a valid key", got.Key, raw)
		}
		var m map[string]any
		if err := json.Unmarshal(got.Metadata, &m); err != nil || m == nil {
			t.Fatalf("metadata %s is not an object", got.Metadata)
		}
		if strings.TrimSpace(got.Content) == "" {
			t.Fatalf("blank summary accepted from %q", raw)
		}
	})
}
