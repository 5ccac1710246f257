package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/kxm"
	"github.com/contextd/contextd/internal/validation"
)

// bodyTypes are the request bodies the strict binder decodes.
var bodyTypes = []reflect.Type{
	reflect.TypeOf(api.PutItemJSONRequestBody{}),
	reflect.TypeOf(api.BatchItemsJSONRequestBody{}),
	reflect.TypeOf(api.AssemblePacketJSONRequestBody{}),
	reflect.TypeOf(api.HandoffCreate{}), // createHandoff's body is raw: this, or the KXM manifest at the end

	reflect.TypeOf(api.AcceptHandoffJSONRequestBody{}),
	reflect.TypeOf(api.CreateAgentJSONRequestBody{}),
	reflect.TypeOf(api.PutProjectJSONRequestBody{}),
	reflect.TypeOf(api.RedactItemVersionJSONRequestBody{}),
	reflect.TypeOf(api.AttributePacketJSONRequestBody{}),
	reflect.TypeOf(kxm.ManifestInput{}),
}

// bindOnce decodes body into a new value of type t as a request would.
func bindOnce(e *echo.Echo, t reflect.Type, body []byte) (any, error) {
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
	req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	v := reflect.New(t).Interface()
	err := strictBinder{}.Bind(v, e.NewContext(req, httptest.NewRecorder()))
	return v, err
}

// resolve finds the value a JSON Pointer names in v, a decoded body.
func resolve(v any, ptr string) bool {
	if ptr == "" {
		return true
	}
	if !strings.HasPrefix(ptr, "/") {
		return false
	}
	for _, tok := range strings.Split(ptr[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch x := v.(type) {
		case map[string]any:
			el, ok := x[tok]
			if !ok {
				return false
			}
			v = el
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(x) {
				return false
			}
			v = x[i]
		default:
			return false
		}
	}
	return true
}

func isJSONSpace(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
}

// FuzzStrictBinder: whatever the body and whichever request type, the
// binder never panics and answers the same every time (the same value, or
// the same problem with the same fields in the same order); it takes only
// bodies that are UTF-8 JSON, treats only an empty body (JSON white space)
// as absent, answers 400, 413 or 422 with fields whose pointers name
// places of the body; and a body it takes, encoded again, is taken again
// as the same value.
func FuzzStrictBinder(f *testing.F) {
	for _, s := range []struct {
		typ  uint8
		body string
	}{
		{0, `{"content":"Refunds within 14 days.","title":"Refund policy","trigger":{"keywords":["refund"]},"metadata":{"n":1.50}}`},
		{0, `{"content":1,"title":true,"priority":1.5,"trigger":{"keywords":"refund"},"extra":null}`},
		{0, `{"content":"a\u0000","summary":"ok"}`},
		{0, `{"content":"x"} {"content":"y"}`},
		{0, `{"content":"x"}]`},
		{0, "{\"content\":\"\xff\"}"},
		{0, " \t\r\n "},
		{1, `{"items":[{"key":"a","content":"x"},{"key":"b","content":2,"priority":99999999999}]}`},
		{1, `{"items":[{"key":"a","content":5},{"key":"b"}]}`}, // a shape problem beside a missing member
		{2, `{"target_role":"critic","task":{"objective":"{{now}}"},"agent_context":{"mediaAssets":[]},"token_budget":4000}`},
		{2, `{"target_role":"x","history":[{"role":"user","content":"refund"},{"role":1}],"token_budget":"10"}`},
		{3, `{"task_id":"t1","target":{"role":"critic"},"intent":"request_review","deliverables":{"artifacts":[{"name":"n"}]}}`},
		{4, `{"reason":"looks good"}`},
		{5, `{"name":"impl","role":"implementer","permission":"edit","projects":["acme"]}`},
		{6, `{"description":"中文 👍🏽 \u2028"}`},
		{7, `{"reason":"PII"}`},
		{8, `{"outcome":"PASS","items":[{"key":"k","version":1}]}`},
		{9, `{"schema":"kxm.handoff-manifest.v1","handoffId":7,"taskId":"t","source":{"agentId":"a","agent_id":"b"},"verificationEvidence":{"witnessExitCode":1.5},"status":null}`},
	} {
		f.Add(s.typ, []byte(s.body))
	}
	e := echo.New()
	f.Fuzz(func(t *testing.T, typ uint8, body []byte) {
		if len(body) > 8192 {
			return
		}
		rt := bodyTypes[int(typ)%len(bodyTypes)]
		v, err := bindOnce(e, rt, body)
		for range 16 { // an order from a map's iteration differs only some of the time
			v2, err2 := bindOnce(e, rt, body)
			if !reflect.DeepEqual(err, err2) {
				t.Fatalf("%s %q: same body, different answers:\n%v\n%v", rt, body, describe(err), describe(err2))
			}
			if err == nil && !reflect.DeepEqual(v, v2) {
				t.Fatalf("%s %q: same body, different values", rt, body)
			}
		}
		switch {
		case err == nil:
			if !utf8.Valid(body) || !json.Valid(body) {
				t.Fatalf("%s: took %q, which is not UTF-8 JSON", rt, body)
			}
			again, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("%s: the value of %q does not encode: %v", rt, body, err)
			}
			v3, err := bindOnce(e, rt, again)
			if err != nil {
				t.Fatalf("%s: took %q, but not its value encoded again, %s: %v", rt, body, again, describe(err))
			}
			// Raw members (json.RawMessage) keep their spelling: compare
			// the values as encoded.
			if again3, _ := json.Marshal(v3); !bytes.Equal(again, again3) {
				t.Fatalf("%s: %q and %s decode differently: %s", rt, body, again, again3)
			}
			return
		case errors.Is(err, io.EOF):
			if !isJSONSpace(body) {
				t.Fatalf("%s: %q, which is not empty, is taken as an absent body", rt, body)
			}
			return
		}
		var p *Problem
		var verr *validation.Error
		switch {
		case errors.As(err, &p):
		case errors.As(err, &verr):
			p = toProblem(err) // the NUL check's 422, one field per string
		default:
			t.Fatalf("%s: %q: the binder's error %T is neither a problem nor a validation error", rt, body, err)
		}
		if (p.Status != 400 && p.Status != 413 && p.Status != 422) || p.Code == "" || p.Detail == "" {
			t.Fatalf("%s: %q: problem %+v", rt, body, p)
		}
		var doc any
		decoded := json.Unmarshal(body, &doc) == nil
		for _, fe := range p.Fields {
			if fe.Pointer != "" && !strings.HasPrefix(fe.Pointer, "/") {
				t.Fatalf("%s: %q: field %+v has no JSON Pointer", rt, body, fe)
			}
			if decoded && !resolve(doc, present(fe)) {
				t.Fatalf("%s: %q: field %+v points at nothing in the body", rt, body, fe)
			}
			if verr == nil && p.Status == 422 && fe.Code != "range" {
				t.Fatalf("%s: %q: a 422 with a %s field", rt, body, fe.Code)
			}
		}
	})
}

func describe(err error) string {
	if err == nil {
		return "nil"
	}
	var p *Problem
	if errors.As(err, &p) {
		b, _ := json.Marshal(p)
		return string(b)
	}
	return reflect.TypeOf(err).String() + " " + err.Error()
}

// present is where a field error points that must be in the body: its
// pointer, or for a required member, which is named where it is missing,
// the object it is missing from.
func present(fe validation.Field) string {
	if fe.Code != "required" {
		return fe.Pointer
	}
	return fe.Pointer[:max(strings.LastIndex(fe.Pointer, "/"), 0)]
}
