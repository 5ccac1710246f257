// Package strictjson decodes a JSON document into a Go value strictly, the
// way contextd takes a request body: only UTF-8, exactly one JSON value
// with nothing after it, no member the target type has no field for, no
// value of the wrong JSON type, no integer its field cannot hold, and no
// NUL character in any string or member name. A document that fails is
// explained by JSON Pointer, with every problem of its shape at once where
// encoding/json stops at the first. Members are matched to fields as
// encoding/json matches them (a repeated member is not refused: the last
// one wins).
//
// The package knows nothing of HTTP: a caller turns an *Error into its
// answer (400 malformed, or 422 when Error.OutOfRange).
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/contextd/contextd/internal/validation"
)

// Error is a document that does not decode strictly into its target.
type Error struct {
	// OutOfRange is set when every problem is a number of the right JSON
	// type that its field cannot hold (too large, or not whole where an
	// integer is wanted): the document has the right shape but invalid
	// values, which is no malformed request.
	OutOfRange bool
	// Detail says what is wrong, in a sentence for a client.
	Detail string
	// Fields are the problems by JSON Pointer, with the codes "type",
	// "unknown_field" and "range" (and those a More adds); nil when the
	// problem has no one place (not JSON, not UTF-8, data after the value).
	Fields []validation.Field
	// Err is the error Explain found no JSON problem in (a reader's
	// error, say), which Detail quotes: a caller that knows it may answer
	// it instead. nil otherwise.
	Err error
}

func (e *Error) Error() string { return "strictjson: " + e.Detail }

// More finds problems beyond a document's shape, for a target whose values
// have rules of their own: Decode calls it with the document and its shape
// problems (never none) and reports what it returns with them.
type More func(body []byte, shape []validation.Field) []validation.Field

// Decode decodes body, a whole JSON document, into the value i points to,
// strictly. It returns
//
//   - io.EOF when body is empty or JSON white space only: the caller
//     decides whether a document was required;
//   - an *Error when body is not UTF-8, not one JSON value, or not of i's
//     shape; more, if not nil, adds its problems to those of the shape;
//   - a *validation.Error naming every string (or member name) that holds
//     a NUL character;
//   - nil otherwise.
//
// Values of the right type but outside the caller's rules are left to the
// caller.
func Decode(body []byte, i any, more More) error {
	if len(bytes.Trim(body, " \t\r\n")) == 0 { // JSON's white space only: a body of U+00A0 is malformed, not absent
		return io.EOF
	}
	if !utf8.Valid(body) {
		return malformed("request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(i); err != nil {
		p := Explain(err, body)
		if len(p.Fields) == 1 {
			// The decoder stops at the first problem, and does not always
			// say where it is: walk the body along the target type for all.
			var v any
			d := json.NewDecoder(bytes.NewReader(body))
			d.UseNumber()
			if d.Decode(&v) == nil {
				var fields []validation.Field
				shapeProblems(v, reflect.TypeOf(i), "", &fields)
				if len(fields) > 0 {
					if more != nil {
						fields = append(fields, more(body, fields)...)
					}
					p.Fields = fields
					p.OutOfRange, p.Detail = false, "the request does not have the contract's shape; see errors"
					allRange := true
					for _, f := range fields {
						allRange = allRange && f.Code == "range"
					}
					if allRange {
						p.OutOfRange, p.Detail = true, "the request has values out of range; see errors"
					}
				}
			}
		}
		return p
	}
	if dec.More() {
		return malformed("request body holds more than one JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return malformed("request body holds data after its JSON value")
	}
	if bytes.Contains(body, []byte(`\u0000`)) {
		return nulProblem(body)
	}
	return nil
}

// nulProblem reports every string of the body that holds a NUL character:
// no text field may, and the database could not store it.
func nulProblem(body []byte) error {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return malformed("request body cannot be decoded: %v", err)
	}
	var errs validation.List
	var walk func(ptr string, v any)
	walk = func(ptr string, v any) {
		switch x := v.(type) {
		case string:
			if strings.ContainsRune(x, 0) {
				errs.Add(ptr, "format", "must not contain NUL characters")
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) { // in order: the same body, the same answer
				el := x[k]
				if strings.ContainsRune(k, 0) {
					errs.Add(ptr, "format", "member names must not contain NUL characters")
				}
				walk(ptr+"/"+validation.EscapePointer(k), el)
			}
		case []any:
			for i, el := range x {
				walk(fmt.Sprintf("%s/%d", ptr, i), el)
			}
		}
	}
	walk("", v)
	if errs.Len() == 0 {
		return nil
	}
	return errs.Err()
}

// Explain is the *Error of err, an error of encoding/json's decoder (or of
// the reader it read from); body, when known, lets a type error name its
// exact place (encoding/json names struct fields but not array indices).
func Explain(err error, body []byte) *Error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return malformed("request body is not valid JSON: %v (at byte %d)", err, syn.Offset)
	case errors.As(err, &typ):
		ptr := "/" + strings.ReplaceAll(typ.Field, ".", "/")
		if typ.Field == "" {
			ptr = ""
		}
		if exact, ok := pointerAt(body, typ.Offset); ok && body != nil {
			ptr = exact
		}
		if jsonType(typ.Type.Kind().String()) == "number" && (typ.Value == "number" || strings.HasPrefix(typ.Value, "number ")) {
			// The right JSON type, out of the field's range: a value problem.
			what := "is out of range for this field"
			if strings.ContainsAny(strings.TrimPrefix(typ.Value, "number"), ".eE") {
				what = "must be a whole number"
			}
			p := outOfRange("%s %s", orBody(ptr), what)
			p.Fields = []validation.Field{{Pointer: ptr, Code: "range", Detail: p.Detail}}
			return p
		}
		p := malformed("%s must be a JSON %s, not %s", orBody(ptr), jsonType(typ.Type.Kind().String()), typ.Value)
		p.Fields = []validation.Field{{Pointer: ptr, Code: "type", Detail: p.Detail}}
		return p
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		p := malformed("unknown field %q", name)
		p.Fields = []validation.Field{{Pointer: "/" + name, Code: "unknown_field", Detail: p.Detail}}
		return p
	case errors.Is(err, io.ErrUnexpectedEOF):
		return malformed("request body is truncated JSON")
	}
	// None of the decoder's own (a reader's error, say): the caller may
	// know it better (Error.Err).
	p := malformed("request body cannot be decoded: %v", err)
	p.Err = err
	return p
}

func malformed(format string, args ...any) *Error {
	return &Error{Detail: fmt.Sprintf(format, args...)}
}

func outOfRange(format string, args ...any) *Error {
	return &Error{OutOfRange: true, Detail: fmt.Sprintf(format, args...)}
}

func orBody(ptr string) string {
	if ptr == "" {
		return "the body"
	}
	return ptr
}

func jsonType(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
		return "number"
	case "slice", "array":
		return "array"
	case "map", "struct", "ptr":
		return "object"
	}
	return goKind
}

// shapeProblems lists every place where v (a body decoded with UseNumber)
// does not fit type t the way encoding/json would decode it: members t has
// no field for, values of the wrong JSON type, integers out of range. The
// decoder stops at the first; a client deserves all of them at once.
func shapeProblems(v any, t reflect.Type, ptr string, out *[]validation.Field) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil || t == reflect.TypeOf(json.RawMessage{}) || t.Kind() == reflect.Interface {
		return // null decodes into anything; raw and any take every value
	}
	wrong := func(want string) {
		*out = append(*out, validation.Field{Pointer: ptr, Code: "type", Detail: fmt.Sprintf("%s must be a JSON %s", orBody(ptr), want)})
	}
	switch t.Kind() {
	case reflect.Struct:
		if t == reflect.TypeOf(time.Time{}) {
			if _, ok := v.(string); !ok {
				wrong("string")
			}
			return
		}
		obj, ok := v.(map[string]any)
		if !ok {
			wrong("object")
			return
		}
		keys := make([]string, 0, len(obj))
		for k := range obj {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			child := ptr + "/" + validation.EscapePointer(k)
			f, ok := jsonField(t, k)
			if !ok {
				*out = append(*out, validation.Field{Pointer: child, Code: "unknown_field", Detail: fmt.Sprintf("unknown field %q", k)})
				continue
			}
			shapeProblems(obj[k], f.Type, child, out)
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			wrong("object")
			return
		}
		for k, el := range obj {
			shapeProblems(el, t.Elem(), ptr+"/"+k, out)
		}
	case reflect.Slice, reflect.Array:
		arr, ok := v.([]any)
		if !ok {
			wrong("array")
			return
		}
		for i, el := range arr {
			shapeProblems(el, t.Elem(), fmt.Sprintf("%s/%d", ptr, i), out)
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			wrong("string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			wrong("boolean")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(json.Number)
		if !ok {
			wrong("number")
			return
		}
		i, err := strconv.ParseInt(string(n), 10, t.Bits())
		switch {
		case err == nil:
			_ = i
		case strings.ContainsAny(string(n), ".eE"):
			*out = append(*out, validation.Field{Pointer: ptr, Code: "range", Detail: orBody(ptr) + " must be a whole number"})
		default:
			*out = append(*out, validation.Field{Pointer: ptr, Code: "range", Detail: orBody(ptr) + " is out of range for this field"})
		}
	case reflect.Float32, reflect.Float64:
		if _, ok := v.(json.Number); !ok {
			wrong("number")
		}
	}
}

// jsonField finds the struct field encoding/json would decode member k into.
func jsonField(t reflect.Type, k string) (reflect.StructField, bool) {
	var fold reflect.StructField
	found := false
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if name == k {
			return f, true
		}
		if !found && strings.EqualFold(name, k) {
			fold, found = f, true
		}
	}
	return fold, found
}

// pointerAt returns the JSON Pointer of the value that ends at byte offset
// in body, by walking its tokens.
func pointerAt(body []byte, offset int64) (string, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	type frame struct {
		array bool
		index int
		key   string
		want  bool // object: the next string token is a key
	}
	var stack []frame
	path := func() string {
		var b strings.Builder
		for _, f := range stack {
			b.WriteByte('/')
			if f.array {
				fmt.Fprintf(&b, "%d", f.index-1)
			} else {
				b.WriteString(strings.ReplaceAll(strings.ReplaceAll(f.key, "~", "~0"), "/", "~1"))
			}
		}
		return b.String()
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		if n := len(stack); n > 0 {
			top := &stack[n-1]
			if !top.array && top.want {
				if k, ok := tok.(string); ok {
					top.key, top.want = k, false
					continue
				}
			}
		}
		isOpen := tok == json.Delim('{') || tok == json.Delim('[')
		isClose := tok == json.Delim('}') || tok == json.Delim(']')
		if !isClose && len(stack) > 0 {
			top := &stack[len(stack)-1]
			if top.array {
				top.index++
			}
		}
		switch {
		case isOpen:
			if dec.InputOffset() >= offset {
				return path(), true
			}
			stack = append(stack, frame{array: tok == json.Delim('['), want: tok == json.Delim('{')})
		case isClose:
			stack = stack[:len(stack)-1]
			if len(stack) > 0 && !stack[len(stack)-1].array {
				stack[len(stack)-1].want = true
			}
		default:
			if dec.InputOffset() >= offset {
				return path(), true
			}
			if len(stack) > 0 && !stack[len(stack)-1].array {
				stack[len(stack)-1].want = true
			}
		}
	}
}
