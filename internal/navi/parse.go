package navi

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/contextd/contextd/internal/validation"
)

// The codes of Parse's problems (validation.Field.Code), stable for clients.
const (
	CodeSyntax    = "syntax"    // not JSON as serde_json reads it (a fatal problem: parsing stops)
	CodeType      = "type"      // a value of the wrong JSON type
	CodeRequired  = "required"  // source or content missing
	CodeDuplicate = "duplicate" // a field given twice
	CodeEnum      = "enum"      // an unknown ContextSource variant
	CodeRange     = "range"     // priority outside i32, or a metadata number outside f64
	CodeFormat    = "format"    // a string serde_json refuses: a lone surrogate escape, invalid UTF-8
	CodeDepth     = "depth"     // nested deeper than serde_json's recursion limit
)

// maxDepth is serde_json's recursion limit: 127 nested arrays and objects
// are read, the 128th is refused.
const maxDepth = 128

// Parse reads one packet as serde_json::from_slice::<ContextPacket> does:
// it accepts exactly what serde accepts and refuses what it refuses, and
// returns a *validation.Error listing the problems by JSON Pointer (into
// data) with the Code* codes. serde stops at the first problem; Parse goes
// on where it can (a value of the wrong type is skipped), so a client sees
// every field it got wrong at once, but a syntax error ends it. What serde
// accepts and contextd may still refuse (blank content, a NUL character, a
// credential-like metadata key) is the item write's to say.
//
// serde's rules, as Parse follows them: the packet is an object (unknown
// members ignored, a known one twice refused) or an array of the fields in
// declaration order (at least id, source, title and content); id and title
// are a string or null; content is a string; priority an integer literal
// in i32 (1.0 and 1e2 are floats, refused); metadata any JSON value (null
// included), with every string valid UTF-8 without lone surrogates and
// every number finite as f64; source is a variant name ("File"), an object
// of one member naming it ({"File":null}, {"Other":"tag"}); "Other" alone
// and unknown names are refused. Strings of ignored members are checked for
// syntax only, as serde_json's ignore_str does. Nesting counts from data's
// top level, as serde_json's limit would for this document alone.
func Parse(data []byte) (Packet, error) { return ParseAt("", data) }

// ParseAt is Parse with every pointer under prefix ("/context_packets/2").
func ParseAt(prefix string, data []byte) (Packet, error) {
	c := &cursor{data: data}
	p, err := c.packet(prefix, 0)
	if err == nil {
		err = c.end(prefix)
	}
	if err != nil {
		c.errs.Add(err.(*syntaxError).ptr, CodeSyntax, "%s", err.(*syntaxError).detail)
	}
	return p, c.errs.Err()
}

// ParseList reads a JSON array of packets, Vec<ContextPacket>; pointers
// are "/3/source" etc. Nesting counts the array.
func ParseList(data []byte) ([]Packet, error) { return ParseListAt("", data) }

// ParseListAt is ParseList with every pointer under prefix.
func ParseListAt(prefix string, data []byte) ([]Packet, error) {
	c := &cursor{data: data}
	out, err := c.list(prefix)
	if err == nil {
		err = c.end(prefix)
	}
	if err != nil {
		c.errs.Add(err.(*syntaxError).ptr, CodeSyntax, "%s", err.(*syntaxError).detail)
	}
	if c.errs.Len() > 0 {
		return nil, c.errs.Err()
	}
	return out, nil
}

// syntaxError is a fatal problem: the rest of the text cannot be read.
type syntaxError struct{ ptr, detail string }

func (e *syntaxError) Error() string { return e.ptr + ": " + e.detail }

// cursor reads data from pos, recording non-fatal problems in errs.
type cursor struct {
	data []byte
	pos  int
	errs validation.List
}

func (c *cursor) fail(ptr, format string, args ...any) error {
	return &syntaxError{ptr: ptr, detail: fmt.Sprintf("invalid JSON at byte %d: ", c.pos) + fmt.Sprintf(format, args...)}
}

func (c *cursor) ws() {
	for c.pos < len(c.data) {
		switch c.data[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *cursor) peek() byte {
	c.ws()
	if c.pos < len(c.data) {
		return c.data[c.pos]
	}
	return 0
}

func (c *cursor) end(ptr string) error {
	if c.peek() != 0 || c.pos < len(c.data) {
		return c.fail(ptr, "trailing characters after the value")
	}
	return nil
}

func (c *cursor) list(ptr string) ([]Packet, error) {
	if c.peek() != '[' {
		if _, err := c.skip(ptr); err != nil {
			return nil, err
		}
		c.errs.Add(ptr, CodeType, "expected an array of context packets")
		return nil, nil
	}
	c.pos++
	var out []Packet
	for i := 0; ; i++ {
		if c.peek() == ']' && i == 0 {
			c.pos++
			return out, nil
		}
		p, err := c.packet(ptr+"/"+strconv.Itoa(i), 1)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
		if done, err := c.next(ptr, ']'); done || err != nil {
			return out, err
		}
	}
}

// next reads the separator after a member or element: true at the closing
// byte, false after a comma (a closing byte right after it is a trailing
// comma, which serde_json refuses).
func (c *cursor) next(ptr string, closing byte) (bool, error) {
	switch c.peek() {
	case closing:
		c.pos++
		return true, nil
	case ',':
		c.pos++
		if b := c.peek(); b == closing {
			return false, c.fail(ptr, "trailing comma")
		}
		return false, nil
	case 0:
		return false, c.fail(ptr, "unexpected end of input")
	}
	return false, c.fail(ptr, "expected %q or %q", ',', closing)
}

// packet reads a ContextPacket (an object, or an array of its fields) at
// depth containers deep.
func (c *cursor) packet(ptr string, depth int) (Packet, error) {
	p := Packet{Metadata: json.RawMessage(`{}`)}
	switch c.peek() {
	case '{', '[':
		if depth+1 >= maxDepth {
			_, err := c.skip(ptr)
			c.errs.Add(ptr, CodeDepth, "nested deeper than serde_json's recursion limit (%d)", maxDepth-1)
			return p, err
		}
	}
	switch c.peek() {
	case '{':
		return p, c.packetObject(&p, ptr, depth+1)
	case '[':
		return p, c.packetArray(&p, ptr, depth+1)
	}
	raw, err := c.skip(ptr)
	if err == nil {
		c.errs.Add(ptr, CodeType, "invalid type: %s, expected struct ContextPacket (an object)", unexpected(raw))
	}
	return p, err
}

// fieldNames are ContextPacket's fields in declaration order.
var fieldNames = []string{"id", "source", "title", "content", "priority", "metadata"}

func (c *cursor) packetObject(p *Packet, ptr string, depth int) error {
	c.pos++
	seen := map[string]bool{}
	if c.peek() == '}' {
		c.pos++
	} else {
		for {
			if c.peek() != '"' {
				return c.fail(ptr, "key must be a string")
			}
			rawKey, err := c.skip(ptr)
			if err != nil {
				return err
			}
			key, problem := decodeString(rawKey)
			if problem != "" {
				c.errs.Add(ptr, CodeFormat, "member name: %s", problem)
			}
			if c.peek() != ':' {
				return c.fail(ptr, "expected ':' after a member name")
			}
			c.pos++
			fptr := ptr + "/" + validation.EscapePointer(key)
			if c.peek() == 0 {
				return c.fail(fptr, "unexpected end of input")
			}
			raw, err := c.skip(fptr)
			if err != nil {
				return err
			}
			if isField(key) {
				if seen[key] {
					c.errs.Add(fptr, CodeDuplicate, "duplicate field `%s`", key)
				} else {
					seen[key] = true
					c.field(p, key, raw, fptr, depth)
				}
			}
			if done, err := c.next(ptr, '}'); err != nil {
				return err
			} else if done {
				break
			}
		}
	}
	for _, f := range []string{"source", "content"} {
		if !seen[f] {
			c.errs.Add(ptr+"/"+f, CodeRequired, "missing field `%s`", f)
		}
	}
	return nil
}

func isField(key string) bool {
	for _, f := range fieldNames {
		if f == key {
			return true
		}
	}
	return false
}

// packetArray reads the packet as serde's visit_seq does: the fields in
// order, the defaulted ones optional at the end, at most six.
func (c *cursor) packetArray(p *Packet, ptr string, depth int) error {
	c.pos++
	n := 0
	if c.peek() == ']' {
		c.pos++
	} else {
		for {
			eptr := ptr + "/" + strconv.Itoa(n)
			raw, err := c.skip(eptr)
			if err != nil {
				return err
			}
			if n < len(fieldNames) {
				c.field(p, fieldNames[n], raw, eptr, depth)
			} else if n == len(fieldNames) {
				c.errs.Add(eptr, CodeType, "invalid length: struct ContextPacket has 6 fields, the array has more")
			}
			n++
			if done, err := c.next(ptr, ']'); err != nil {
				return err
			} else if done {
				break
			}
		}
	}
	switch {
	case n < 2:
		c.errs.Add(ptr+"/1", CodeRequired, "invalid length 1, expected struct ContextPacket with 6 elements (source is missing)")
	case n < 4:
		c.errs.Add(ptr+"/3", CodeRequired, "invalid length 3, expected struct ContextPacket with 6 elements (content is missing)")
	}
	return nil
}
