package ctxtype

import (
	"encoding/json"
	"testing"
)

// FuzzDecodeRequest: any bytes either fail to decode or normalize cleanly,
// and a normalized request survives the trip through its stored form —
// which is what replay depends on.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"target_role":"critic"}`))
	f.Add([]byte(`{"target_role":"x","agent_context":{"n":1e2,"a":[],"o":{"k":[{"z":1.50}]}},"variables":{"v":true}}`))
	f.Add([]byte(`{"target_role":"x","history":[{"role":"user","author":"person","content":"refund"}],"token_budget":10}`))
	f.Add([]byte(`{"target_role":"x","task":{"objective":"{{now}}"},"format":"json","tokenizer":"cl100k_base"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		r, err := DecodeRequest(raw)
		if err != nil || r.Normalize() != nil {
			return
		}
		stored, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeRequest(stored)
		if err != nil {
			t.Fatalf("stored request does not decode: %v", err)
		}
		if err := back.Normalize(); err != nil {
			t.Fatalf("stored request does not normalize: %v", err)
		}
		again, _ := json.Marshal(back)
		if string(again) != string(stored) {
			t.Fatalf("round trip changed the request:\n%s\n%s", stored, again)
		}
	})
}
