package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/validation"
)

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// strictBinder decodes a JSON request body strictly: an unknown field, a value
// of the wrong JSON type or trailing data is 400 malformed (with a pointer
// where one is known), an empty body is io.EOF (the generated code treats it
// as absent for optional bodies; required ones get 400 from requireBody).
// Values of the right type but out of range are left to the services (422).
type strictBinder struct{}

func (strictBinder) Bind(i any, c echo.Context) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		if p := readProblem(err); p != nil {
			return p
		}
		return problem(400, "malformed", "cannot read request body: %v", err)
	}
	return decodeStrict(body, i)
}

// decodeStrict is the strict decoding of Bind, of a body already read: for
// a part of a request that is itself in the contract's shape (the items of
// an import in contextd's format).
func decodeStrict(body []byte, i any) error {
	if len(bytes.Trim(body, " \t\r\n")) == 0 { // JSON's white space only: a body of U+00A0 is malformed, not absent
		return io.EOF
	}
	if !utf8.Valid(body) {
		return problem(400, "malformed", "request body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(i); err != nil {
		p := decodeProblem(err, body)
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
					if _, ok := i.(*api.BatchRequest); ok {
						fields = append(fields, batchValueProblems(body, fields)...)
					}
					p.Fields = fields
					p.Status, p.Code, p.Detail = 400, "malformed", "the request does not have the contract's shape; see errors"
					allRange := true
					for _, f := range fields {
						allRange = allRange && f.Code == "range"
					}
					if allRange {
						p.Status, p.Code, p.Detail = 422, "validation_failed", "the request has values out of range; see errors"
					}
				}
			}
		}
		return p
	}
	if dec.More() {
		return problem(400, "malformed", "request body holds more than one JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return problem(400, "malformed", "request body holds data after its JSON value")
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
		return problem(400, "malformed", "request body cannot be decoded: %v", err)
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

// decodeProblem explains a decoding error; body, when known, lets a type
// error name its exact place (encoding/json names struct fields but not
// array indices).
func decodeProblem(err error, body []byte) *Problem {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return problem(400, "malformed", "request body is not valid JSON: %v (at byte %d)", err, syn.Offset)
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
			p := problem(422, "validation_failed", "%s %s", orBody(ptr), what)
			p.Fields = []validation.Field{{Pointer: ptr, Code: "range", Detail: p.Detail}}
			return p
		}
		p := problem(400, "malformed", "%s must be a JSON %s, not %s", orBody(ptr), jsonType(typ.Type.Kind().String()), typ.Value)
		p.Fields = []validation.Field{{Pointer: ptr, Code: "type", Detail: p.Detail}}
		return p
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		p := problem(400, "malformed", "unknown field %q", name)
		p.Fields = []validation.Field{{Pointer: "/" + name, Code: "unknown_field", Detail: p.Detail}}
		return p
	case errors.Is(err, io.ErrUnexpectedEOF):
		return problem(400, "malformed", "request body is truncated JSON")
	}
	if p := readProblem(err); p != nil {
		return p
	}
	return problem(400, "malformed", "request body cannot be decoded: %v", err)
}

// readProblem is the answer to a body that could not be read to its end
// for a reason of its own: over the body limit (413), or arriving too
// slowly, under --min-body-rate or past --read-timeout (408; the rest of
// the body is not coming, so writeProblem closes the connection). nil for
// any other read error.
func readProblem(err error) *Problem {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return problem(413, "payload_too_large", "request body is over the %d-byte limit", mbe.Limit)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return nil
	}
	var slow *app.SlowBodyError
	if errors.As(err, &slow) {
		return problem(408, "request_timeout", "%s", slow.Error())
	}
	return problem(408, "request_timeout", "the request body did not arrive within the server's read timeout")
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

// requireBody turns a missing required body into 400.
func requireBody[T any](b *T) (*T, error) {
	if b == nil {
		return nil, problem(400, "malformed", "a JSON request body is required")
	}
	return b, nil
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

// batchValueProblems are the value problems (a bad key, blank content, an
// unknown kind, a metadata that is no object, ...) of the items of a batch
// whose shape is wrong, those of its items that are in the contract's
// shape: a batch's answer names every problem of every item at once,
// whichever kind it is. shape are the shape problems; one outside the items
// leaves nothing more to say.
func batchValueProblems(body []byte, shape []validation.Field) []validation.Field {
	var raw struct {
		Items []json.RawMessage `json:"items"`
	}
	if json.Unmarshal(body, &raw) != nil || len(raw.Items) == 0 || len(raw.Items) > item.MaxBatch {
		return nil
	}
	skip := make([]bool, len(raw.Items))
	for _, f := range shape {
		n := itemIndex(f.Pointer)
		if n < 0 || n >= len(skip) {
			return nil
		}
		skip[n] = true
	}
	items := make([]api.BatchItem, len(raw.Items))
	for n, r := range raw.Items {
		if !skip[n] && json.Unmarshal(r, &items[n]) != nil {
			skip[n] = true
		}
	}
	var out []validation.Field
	if p := metadataProblems(items, skip); p != nil {
		out = p.Fields
	}
	return append(out, checkBatchValues(items, skip)...)
}

// metadataProblems is the problem of the metadata that are no object among
// the items not skipped (metadataShape), nil if none; it marks those items
// skipped, for checkBatchValues.
func metadataProblems(items []api.BatchItem, skip []bool) *Problem {
	metas := map[string]*json.RawMessage{}
	for n := range items {
		if !skip[n] {
			metas[fmt.Sprintf("/items/%d/metadata", n)] = items[n].Metadata
		}
	}
	var p *Problem
	if !errors.As(metadataShape(metas), &p) {
		return nil
	}
	for _, f := range p.Fields {
		skip[itemIndex(f.Pointer)] = true
	}
	return p
}

// checkBatchValues are the value problems of a batch's items but those
// skipped (item.Check).
func checkBatchValues(items []api.BatchItem, skip []bool) []validation.Field {
	ins := make([]item.Input, len(items))
	for n, b := range items {
		if !skip[n] {
			ins[n] = batchInput(b)
		}
	}
	var verr *validation.Error
	if err := item.Check(ins, skip); errors.As(err, &verr) {
		return verr.Fields
	}
	return nil
}

// itemIndex is the item a pointer into a batch names ("/items/3/key": 3),
// or -1.
func itemIndex(pointer string) int {
	rest, ok := strings.CutPrefix(pointer, "/items/")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(strings.SplitN(rest, "/", 2)[0])
	if err != nil || n < 0 {
		return -1
	}
	return n
}
