package item

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/validation"
)

// wireInput is an item write as the API's JSON has it (api.ItemWrite),
// decoded into the service's Input the way the HTTP layer does.
type wireInput struct {
	Key        string              `json:"key"`
	Kind       *string             `json:"kind"`
	Source     *string             `json:"source"`
	Title      *string             `json:"title"`
	Summary    *string             `json:"summary"`
	Content    string              `json:"content"`
	Priority   *int32              `json:"priority"`
	Authority  *string             `json:"authority"`
	Confidence *string             `json:"confidence"`
	StateKey   *string             `json:"state_key"`
	ValidFrom  *string             `json:"valid_from"`
	ValidUntil *string             `json:"valid_until"`
	Slot       *string             `json:"slot"`
	Trigger    *ctxtype.Trigger    `json:"trigger"`
	Roles      *ctxtype.Roles      `json:"roles"`
	Template   *bool               `json:"template"`
	Metadata   json.RawMessage     `json:"metadata"`
	Provenance *ctxtype.Provenance `json:"provenance"`
	Propose    bool                `json:"proposal"`
}

func (w wireInput) input() Input {
	return Input(w)
}

// normalized runs normalize on a fresh copy of the input, as each request
// decodes its own.
func normalized(body []byte) (Input, ctxtype.Fields, error) {
	var w wireInput
	_ = json.Unmarshal(body, &w) // a body that does not decode is the binder's 400, tested there
	in := w.input()
	var errs validation.List
	f := in.normalize("", &errs)
	// As the write path does, for an admin writer: an omitted authority
	// takes its default (DefaultAuthority).
	defaultAuthority(&auth.Agent{Permission: auth.Admin}, &f)
	return in, f, errs.Err()
}

// inputOf is a write of f as it is stored: every field given.
func inputOf(key string, f ctxtype.Fields) Input {
	p := int32(f.Priority)
	tm := func(t *time.Time) *string {
		if t == nil {
			return nil
		}
		s := t.Format(time.RFC3339Nano)
		return &s
	}
	trig, roles, prov := f.Trigger, f.Roles, f.Provenance
	return Input{Key: key, Kind: &f.Kind, Source: &f.Source, Title: &f.Title, Summary: &f.Summary, Content: f.Content,
		Priority: &p, Authority: &f.Authority, Confidence: &f.Confidence, StateKey: &f.StateKey,
		ValidFrom: tm(f.ValidFrom), ValidUntil: tm(f.ValidUntil), Slot: &f.Slot, Trigger: &trig, Roles: &roles,
		Template: &f.Template, Metadata: f.Metadata, Provenance: &prov}
}

var fieldCodes = map[string]bool{"required": true, "enum": true, "format": true, "range": true, "too_long": true, "too_deep": true, "invalid": true,
	"type": true, "forbidden_key": true}

// FuzzNormalize: an item write's validation never panics and is a
// function of the write: the same body gives the same Fields (the same
// fields hash) and the same list of problems, in the same order, every
// time. A write it accepts is one the service can store (its fields
// encode, prepare succeeds) and writing the stored fields again is
// accepted and changes nothing, so a repeated PUT makes no new version.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{
		`{"key":"refund-policy","content":"Refunds within 14 days.","title":"Refund policy","kind":"knowledge","source":"file"}`,
		`{"key":"k","kind":"state","state_key":"scene","content":"scene 2 of 5","authority":"policy","confidence":"verified","priority":-3}`,
		`{"key":"k","content":"x","trigger":{"keywords":["refund","money back"]},"roles":{"visible_to":["critic"],"hidden_from":[]}}`,
		`{"key":"k","content":"x","trigger":{"keywords":["chargeback"],"match":"stem"}}`,
		`{"key":"k","content":"x","trigger":{"keywords":["chargeback"],"match":"fuzzy"}}`,
		`{"key":"k","content":"x","trigger":{"tool":"search"},"slot":"tools","metadata":{"ticket":"ORD-20391","n":1.50,"nested":{"a":[1e2]}}}`,
		`{"key":"k","content":"x","valid_from":"2026-01-02T03:04:05.123456789+01:00","valid_until":"2026-02-01T00:00:00Z"}`,
		`{"key":"k","content":"Hello {{project}} at {{now}}","template":true,"provenance":{"source_ref":"git:abc","derived_from":["a@1"]}}`,
		`{"key":"k","content":"  ","kind":"nope","source":"other:Tag.1","authority":"x","confidence":"y","slot":"z"}`,
		`{"key":"k","content":"x","trigger":{"always":true,"relevance":true},"metadata":[1]}`,
		`{"key":"k","content":"x","metadata":{"apiKey":"k","max_tokens":5}}`,
		`{"key":"k","content":"中文文本，更多内容。 👍🏽","title":"\u2028 title","summary":"ü"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > 4096 {
			return
		}
		in, f1, err1 := normalized(body)
		j1, merr1 := json.Marshal(f1)
		// Several times over: an order that comes from a map's iteration
		// differs between two runs only some of the time.
		for range 16 {
			_, f2, err2 := normalized(body)
			j2, merr2 := json.Marshal(f2)
			if !bytes.Equal(j1, j2) || fmt.Sprint(merr1) != fmt.Sprint(merr2) {
				t.Fatalf("same write, different fields:\n%s\n%s", j1, j2)
			}
			if !reflect.DeepEqual(err1, err2) {
				t.Fatalf("same write %s, different problems:\n%v\n%v", body, err1, err2)
			}
		}
		if err1 != nil {
			verr, ok := err1.(*validation.Error)
			if !ok {
				t.Fatalf("normalize's error is %T, not a validation error", err1)
			}
			for _, fe := range verr.Fields {
				if !strings.HasPrefix(fe.Pointer, "/") || !fieldCodes[fe.Code] || fe.Detail == "" {
					t.Fatalf("problem %+v has a bad pointer, code or detail", fe)
				}
			}
			return
		}
		if merr1 != nil {
			t.Fatalf("accepted write %s has fields that do not encode: %v", body, merr1)
		}
		if len(f1.Content) <= 2048 {
			p1, err := prepare("k", f1)
			if err != nil {
				t.Fatalf("accepted write %s does not prepare: %v", body, err)
			}
			p2, _ := prepare("k", f1)
			if !reflect.DeepEqual(p1, p2) {
				t.Fatalf("prepare is not deterministic: %+v vs %+v", p1, p2)
			}
			if sum := sha256.Sum256(j1); !bytes.Equal(p1.fieldsHash, sum[:]) {
				t.Fatal("fields hash is not the SHA-256 of the fields' JSON")
			}
		}
		var errs validation.List
		back := inputOf(in.Key, f1)
		f3 := back.normalize("", &errs)
		if err := errs.Err(); err != nil {
			t.Fatalf("the stored fields of %s are refused when written again: %v", body, err)
		}
		if j3, _ := json.Marshal(f3); !bytes.Equal(j3, j1) {
			t.Fatalf("writing the stored fields again changes them:\n%s\n%s", j1, j3)
		}
	})
}
