package strictjson

import (
	"encoding/json"
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/contextd/contextd/internal/validation"
)

type inner struct {
	N int8 `json:"n"`
}

type target struct {
	Name  string          `json:"name"`
	Count int8            `json:"count"`
	Tags  []string        `json:"tags"`
	Items []inner         `json:"items"`
	Raw   json.RawMessage `json:"raw"`
}

// TestDecode: what Decode answers for each kind of document, and where.
func TestDecode(t *testing.T) {
	for _, c := range []struct {
		name       string
		body       string
		outOfRange bool
		detail     string
		fields     []validation.Field
	}{
		{name: "not UTF-8", body: "{\"name\":\"\xff\"}", detail: "request body is not valid UTF-8"},
		{name: "not JSON", body: `{"name":`, detail: "request body is truncated JSON"},
		{name: "two values", body: `{} {}`, detail: "request body holds more than one JSON value"},
		{name: "data after", body: `{}]`, detail: "request body holds data after its JSON value"},
		{
			name: "unknown member", body: `{"name":"a","extra":1}`,
			detail: "the request does not have the contract's shape; see errors",
			fields: []validation.Field{{Pointer: "/extra", Code: "unknown_field", Detail: "unknown field \"extra\""}},
		},
		{
			name: "every shape problem at once", body: `{"name":1,"tags":"x","items":[{"n":1},{"n":true}],"extra":null}`,
			detail: "the request does not have the contract's shape; see errors",
			fields: []validation.Field{
				{Pointer: "/extra", Code: "unknown_field", Detail: "unknown field \"extra\""},
				{Pointer: "/items/1/n", Code: "type", Detail: "/items/1/n must be a JSON number"},
				{Pointer: "/name", Code: "type", Detail: "/name must be a JSON string"},
				{Pointer: "/tags", Code: "type", Detail: "/tags must be a JSON array"},
			},
		},
		{
			name: "out of range", body: `{"count":300,"items":[{"n":1.5}]}`, outOfRange: true,
			detail: "the request has values out of range; see errors",
			fields: []validation.Field{
				{Pointer: "/count", Code: "range", Detail: "/count is out of range for this field"},
				{Pointer: "/items/0/n", Code: "range", Detail: "/items/0/n must be a whole number"},
			},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			var v target
			err := Decode([]byte(c.body), &v, nil)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("Decode(%q) = %v; want an *Error", c.body, err)
			}
			if e.OutOfRange != c.outOfRange || e.Detail != c.detail || !reflect.DeepEqual(e.Fields, c.fields) || e.Err != nil {
				t.Fatalf("Decode(%q) = %+v; want OutOfRange %v, %q, %+v", c.body, e, c.outOfRange, c.detail, c.fields)
			}
		})
	}
}

// TestDecodeTakes: a document of the target's shape is decoded; an empty
// one is io.EOF; a NUL character is a validation error at its place.
func TestDecodeTakes(t *testing.T) {
	var v target
	if err := Decode([]byte(`{"name":"a","count":-128,"raw":[1, 2],"items":[{"n":127}]}`), &v, nil); err != nil {
		t.Fatal(err)
	}
	if v.Name != "a" || v.Count != -128 || string(v.Raw) != "[1, 2]" || len(v.Items) != 1 || v.Items[0].N != 127 {
		t.Fatalf("decoded %+v", v)
	}
	if err := Decode([]byte(" \t\r\n"), &v, nil); err != io.EOF {
		t.Fatalf("white space only: %v; want io.EOF", err)
	}
	var verr *validation.Error
	err := Decode([]byte(`{"name":"a\u0000","tags":["ok","\u0000"]}`), &v, nil)
	want := []validation.Field{
		{Pointer: "/name", Code: "format", Detail: "must not contain NUL characters"},
		{Pointer: "/tags/1", Code: "format", Detail: "must not contain NUL characters"},
	}
	if !errors.As(err, &verr) || !reflect.DeepEqual(verr.Fields, want) {
		t.Fatalf("NUL characters: %v; want %+v", err, want)
	}
}

// TestDecodeMore: more is asked only about a document whose shape is
// wrong, and what it finds decides with the shape problems whether the
// document is only out of range.
func TestDecodeMore(t *testing.T) {
	called := 0
	more := func(body []byte, shape []validation.Field) []validation.Field {
		called++
		return []validation.Field{{Pointer: "/name", Code: "required", Detail: "more"}}
	}
	var v target
	if err := Decode([]byte(`{"name":"a"}`), &v, more); err != nil || called != 0 {
		t.Fatalf("a document of the right shape: %v, more called %d times", err, called)
	}
	err := Decode([]byte(`{"count":300}`), &v, more)
	var e *Error
	if !errors.As(err, &e) || called != 1 || e.OutOfRange || len(e.Fields) != 2 || e.Fields[1].Detail != "more" {
		t.Fatalf("a range problem beside more's: %+v (more called %d times)", err, called)
	}
}

// TestExplain: an error that is no JSON problem is quoted, and kept for
// the caller.
func TestExplain(t *testing.T) {
	cause := errors.New("connection reset")
	e := Explain(cause, nil)
	if e.Err != cause || e.OutOfRange || e.Detail != "request body cannot be decoded: connection reset" || e.Fields != nil {
		t.Fatalf("Explain = %+v", e)
	}
}
