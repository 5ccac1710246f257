package server

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/ctxtype"
)

// packetRequestSeeds are request bodies that reach every field of the
// mapper, and the odd spellings a client may send: nulls, a budget of 0,
// numbers that float64 would round, HTML characters in a context packet,
// objects where agent_context and variables want objects, and not.
var packetRequestSeeds = []string{
	`{"target_role":"coder"}`,
	`{"target_role":"coder","token_budget":0}`,
	`{"target_role":"coder","token_budget":null,"format":null,"agent_context":null,"variables":null}`,
	`{"target_role":"coder","task":{},"plan":{},"acceptance_criteria":[],"history":[],"tool_results":[],"pins":[],"predecessors":[]}`,
	`{"target_role":"coder","task":{"task_id":"T-1","step_id":"s","step_attempt":2,"objective":"fix","allowed_outcomes":["done"],"permission_ceiling":"edit"},
	  "plan":{"plan_hash":"h","active_step_index":1,"total_steps":3,"settled_decisions":["a"]},
	  "acceptance_criteria":[{"id":"c1","description":"d","verification_kind":"gate","target_ref":"r","required":true},{}],
	  "history":[{"role":"user","author":"person","content":"refund?"},{}],"tool_results":[{"tool":"grep","status":"ok","content":"x"}],
	  "pins":["k1"],"predecessors":["h_1"],"query":"refund","token_budget":900,"format":"kxm","tokenizer":"cl100k_base"}`,
	`{"target_role":"coder","agent_context":{"n":12345678901234567890,"f":1.50,"deep":{"a":[1,{"b":null}]},"s":"<&>"},"variables":{"x":1e400}}`,
	`{"target_role":"coder","context_packets":[ {"id":"p1", "content":"<b>&</b>", "priority": 3, "metadata":{"k":1.0}} , 7, "s", null ]}`,
	`{"target_role":"coder","agent_context":[1,2]}`,
	`{"target_role":"coder","agent_context":"s","variables":[]}`,
	`{"target_role":"coder","variables":true}`,
}

// FuzzPacketRequestMapper checks that the handler's typed mapper gives what
// the JSON round trip it replaced gave (marshal the bound body, decode it
// with ctxtype.DecodeRequest): the same request, normalised the same, or
// the same error. Replay decodes stored requests with DecodeRequest, so a
// difference here would be a packet that replays differently.
func FuzzPacketRequestMapper(f *testing.F) {
	for _, s := range packetRequestSeeds {
		f.Add([]byte(s))
	}
	e := echo.New()
	f.Fuzz(func(t *testing.T, body []byte) {
		bound, err := bindOnce(e, reflect.TypeOf(api.PacketRequest{}), body)
		if err != nil {
			return // refused before the handler: the binder's own fuzz covers it
		}
		b := bound.(*api.PacketRequest)
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatalf("marshal the bound body: %v", err)
		}
		want, wantErr := ctxtype.DecodeRequest(raw)
		got, gotErr := fromPacketRequestAPI(b)
		assertSameRequest(t, want, wantErr, got, gotErr)
	})
}

// assertSameRequest compares two decodings of one request: their errors,
// or their values before and after Normalize (with its error) and the
// stored JSON of each.
func assertSameRequest(t *testing.T, want *ctxtype.Request, wantErr error, got *ctxtype.Request, gotErr error) {
	t.Helper()
	if (wantErr == nil) != (gotErr == nil) || (wantErr != nil && wantErr.Error() != gotErr.Error()) {
		t.Fatalf("errors differ: round trip %v, mapper %v", wantErr, gotErr)
	}
	if wantErr != nil {
		return
	}
	if !reflect.DeepEqual(want, got) {
		t.Fatalf("decoded requests differ:\nround trip %#v\nmapper     %#v", want, got)
	}
	wantN, gotN := want.Normalize(), got.Normalize()
	if (wantN == nil) != (gotN == nil) || (wantN != nil && wantN.Error() != gotN.Error()) {
		t.Fatalf("Normalize differs: round trip %v, mapper %v", wantN, gotN)
	}
	wb, _ := json.Marshal(want)
	gb, _ := json.Marshal(got)
	if !bytes.Equal(wb, gb) {
		t.Fatalf("stored requests differ:\nround trip %s\nmapper     %s", wb, gb)
	}
}

// TestPacketRequestMapperSeeds runs the fuzz target's seeds in every
// `make test`, and checks that the seeds reach what they are there for.
func TestPacketRequestMapperSeeds(t *testing.T) {
	e := echo.New()
	refused := 0
	for _, s := range packetRequestSeeds {
		bound, err := bindOnce(e, reflect.TypeOf(api.PacketRequest{}), []byte(s))
		if err != nil {
			t.Fatalf("seed %s: bind: %v", s, err)
		}
		b := bound.(*api.PacketRequest)
		raw, _ := json.Marshal(b)
		want, wantErr := ctxtype.DecodeRequest(raw)
		got, gotErr := fromPacketRequestAPI(b)
		assertSameRequest(t, want, wantErr, got, gotErr)
		if gotErr != nil {
			refused++
		}
	}
	if refused != 3 {
		t.Fatalf("%d seeds refused by the mapper; want the 3 with a non-object agent_context or variables", refused)
	}
	got, err := fromPacketRequestAPI(&api.PacketRequest{TargetRole: "coder", TokenBudget: new(0)})
	if err != nil {
		t.Fatal(err)
	}
	if err := got.Normalize(); err == nil {
		t.Fatal("a token_budget of 0 sent was taken for the default")
	}
}
