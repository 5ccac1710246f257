package navi

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/contextd/contextd/internal/validation"
)

// field reads one known field's value (raw, already checked for syntax)
// into p, recording a problem when serde would refuse it.
func (c *cursor) field(p *Packet, name string, raw []byte, ptr string, depth int) {
	var code, detail string
	switch name {
	case "id":
		p.ID, code, detail = optString(raw)
	case "title":
		p.Title, code, detail = optString(raw)
	case "content":
		p.Content, code, detail = stringValue(raw)
	case "priority":
		p.Priority, code, detail = i32(raw)
	case "source":
		p.Source, code, detail = parseSource(raw, depth)
	case "metadata":
		var at string
		if at, code, detail = checkValue(raw, "", depth); code == "" {
			p.Metadata = json.RawMessage(strings.Clone(string(raw)))
		}
		ptr += at
	}
	if code != "" {
		c.errs.Add(ptr, code, "%s", detail)
	}
}

func optString(raw []byte) (*string, string, string) {
	if string(raw) == "null" {
		return nil, "", ""
	}
	s, code, detail := stringValue(raw)
	if code != "" {
		return nil, code, detail
	}
	return &s, "", ""
}

func stringValue(raw []byte) (string, string, string) {
	if raw[0] != '"' {
		return "", CodeType, "invalid type: " + unexpected(raw) + ", expected a string"
	}
	s, problem := decodeString(raw)
	if problem != "" {
		return "", CodeFormat, problem
	}
	return s, "", ""
}

func i32(raw []byte) (int32, string, string) {
	if raw[0] != '-' && (raw[0] < '0' || raw[0] > '9') {
		return 0, CodeType, "invalid type: " + unexpected(raw) + ", expected i32"
	}
	if strings.ContainsAny(string(raw), ".eE") {
		return 0, CodeType, "invalid type: floating point `" + string(raw) + "`, expected i32"
	}
	n, err := strconv.ParseInt(string(raw), 10, 32)
	if err != nil {
		return 0, CodeRange, "invalid value: integer `" + string(raw) + "`, expected i32"
	}
	return int32(n), "", ""
}

// parseSource reads a ContextSource as serde_json's deserialize_enum does.
func parseSource(raw []byte, depth int) (Source, string, string) {
	switch raw[0] {
	case '"':
		name, problem := decodeString(raw)
		if problem != "" {
			return Source{}, CodeFormat, problem
		}
		if _, ok := unitVariants[name]; ok {
			return Unit(name), "", ""
		}
		if name == Other {
			return Source{}, CodeType, "invalid type: unit variant, expected newtype variant (Other takes a tag: {\"Other\":\"tag\"})"
		}
		return Source{}, CodeEnum, "unknown variant `" + name + "`, expected one of " + variantList
	case '{':
		if depth+1 >= maxDepth {
			return Source{}, CodeDepth, "nested deeper than serde_json's recursion limit"
		}
		return sourceObject(raw)
	}
	return Source{}, CodeType, "invalid type: " + unexpected(raw) + ", expected enum ContextSource"
}

// sourceObject reads {"Variant": value}: exactly one member, a unit
// variant's value null, Other's a string.
func sourceObject(raw []byte) (Source, string, string) {
	c := &cursor{data: raw, pos: 1}
	if c.peek() != '"' {
		return Source{}, CodeType, "invalid type: map without a member, expected enum ContextSource"
	}
	rawKey, _ := c.skip("")
	name, problem := decodeString(rawKey)
	if problem != "" {
		return Source{}, CodeFormat, problem
	}
	_, unit := unitVariants[name]
	if !unit && name != Other {
		return Source{}, CodeEnum, "unknown variant `" + name + "`, expected one of " + variantList
	}
	c.peek()
	c.pos++ // ':'
	c.peek()
	val, _ := c.skip("")
	var s Source
	if unit {
		if string(val) != "null" {
			return Source{}, CodeType, "invalid type: " + unexpected(val) + ", expected unit"
		}
		s = Unit(name)
	} else {
		tag, code, detail := stringValue(val)
		if code != "" {
			return Source{}, code, "Other: " + detail
		}
		s = OtherSource(tag)
	}
	if c.peek() != '}' {
		return Source{}, CodeType, "a source object has exactly one member"
	}
	return s, "", ""
}

// checkValue checks raw (syntax already checked) as serde_json reads a
// Value: strings (member names too) valid, numbers finite as f64, at most
// maxDepth-1 containers deep counting the depth ones around it. It returns
// the pointer (relative to raw) of the first problem.
func checkValue(raw []byte, ptr string, depth int) (string, string, string) {
	c := &cursor{data: raw}
	return c.check(ptr, depth)
}

func (c *cursor) check(ptr string, depth int) (string, string, string) {
	b := c.peek()
	switch b {
	case '{', '[':
		if depth+1 >= maxDepth {
			return ptr, CodeDepth, "nested deeper than serde_json's recursion limit (" + strconv.Itoa(maxDepth-1) + ")"
		}
		c.pos++
		for i := 0; ; i++ {
			if c.peek() == b+2 { // '}' or ']'
				c.pos++
				return "", "", ""
			}
			if c.peek() == ',' {
				c.pos++
			}
			cptr := ptr + "/" + strconv.Itoa(i)
			if b == '{' {
				rawKey, _ := c.skip("")
				key, problem := decodeString(rawKey)
				if problem != "" {
					return ptr, CodeFormat, "member name: " + problem
				}
				cptr = ptr + "/" + validation.EscapePointer(key)
				c.peek()
				c.pos++ // ':'
			}
			if at, code, detail := c.check(cptr, depth+1); code != "" {
				return at, code, detail
			}
		}
	case '"':
		raw, _ := c.skip("")
		if _, problem := decodeString(raw); problem != "" {
			return ptr, CodeFormat, problem
		}
	case 't', 'f', 'n':
		_, _ = c.skip("")
	default:
		raw, _ := c.skip("")
		if f, _ := strconv.ParseFloat(string(raw), 64); math.IsInf(f, 0) {
			return ptr, CodeRange, "number out of range: " + string(raw)
		}
	}
	return "", "", ""
}

// decodeString decodes a JSON string (quotes included, syntax already
// checked) as serde_json's parse_str does, which refuses what Go's decoder
// would replace by U+FFFD: invalid UTF-8 and unpaired surrogate escapes.
func decodeString(raw []byte) (string, string) {
	s := raw[1 : len(raw)-1]
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			out = append(out, s[i])
			continue
		}
		i++
		switch s[i] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(s[i+1 : i+5])
			i += 4
			if r >= 0xDC00 && r <= 0xDFFF {
				return "", "lone trailing surrogate in hex escape"
			}
			if r >= 0xD800 && r <= 0xDBFF {
				if i+6 >= len(s) || s[i+1] != '\\' || s[i+2] != 'u' {
					return "", "lone leading surrogate in hex escape"
				}
				lo := hex4(s[i+3 : i+7])
				if lo < 0xDC00 || lo > 0xDFFF {
					return "", "lone leading surrogate in hex escape"
				}
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
				i += 6
			}
			out = utf8.AppendRune(out, r)
		default: // '"', '\\', '/'
			out = append(out, s[i])
		}
	}
	if !utf8.Valid(out) {
		return "", "invalid unicode code point (the string is not valid UTF-8)"
	}
	return string(out), ""
}

func hex4(h []byte) rune {
	n, _ := strconv.ParseUint(string(h), 16, 32)
	return rune(n)
}

// unexpected names raw's JSON type as serde's Unexpected does.
func unexpected(raw []byte) string {
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "map"
	case '[':
		return "sequence"
	case 't', 'f':
		return "boolean `" + string(raw) + "`"
	case 'n':
		return "null"
	}
	return "number `" + string(raw) + "`"
}
