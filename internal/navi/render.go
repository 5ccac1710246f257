package navi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Header is the first line of navi's block.
const Header = "=== External Context Packets ===\n"

// Render is navi's render_context_packets, byte for byte: ok is false
// (Rust's None) for no packets; otherwise Header, then each packet by
// descending priority — a stable sort, so equal priorities keep their
// order — as Block writes it.
func Render(packets []Packet) (text string, ok bool) {
	if len(packets) == 0 {
		return "", false
	}
	ordered := append([]Packet(nil), packets...)
	sort.SliceStable(ordered, func(i, j int) bool { return ordered[i].Priority > ordered[j].Priority })
	var b strings.Builder
	b.WriteString(Header)
	for _, p := range ordered {
		b.WriteString(Block(p.Source.Debug(), int64(p.Priority), p.Title, p.Content))
	}
	return b.String(), true
}

// Block is one packet of navi's block: "- source: {:?}; priority: {};
// title: {}\n" (source is already in its Debug form; a nil title is
// "untitled"; the title is written raw, as Display writes a String), then
// the content trimmed as Rust's str::trim trims it, then "\n\n".
func Block(source string, priority int64, title *string, content string) string {
	t := "untitled"
	if title != nil {
		t = *title
	}
	return "- source: " + source + "; priority: " + strconv.FormatInt(priority, 10) + "; title: " + t + "\n" + Trim(content) + "\n\n"
}

// Trim is Rust's str::trim: it removes leading and trailing White_Space
// (Unicode's derived core property), exactly the code points IsWhiteSpace
// lists.
func Trim(s string) string { return strings.TrimFunc(s, IsWhiteSpace) }

// IsWhiteSpace reports whether r has Unicode's White_Space property, the
// set Rust's char::is_whitespace (and so str::trim) uses: U+0009–U+000D,
// U+0020, U+0085, U+00A0, U+1680, U+2000–U+200A, U+2028, U+2029, U+202F,
// U+205F and U+3000. (It is also Go's unicode.IsSpace; a test keeps them
// equal. U+180E and U+200B, which look like spaces, are not in it.)
func IsWhiteSpace(r rune) bool {
	switch {
	case r >= 0x09 && r <= 0x0D, r == 0x20, r == 0x85, r == 0xA0, r == 0x1680:
		return true
	case r >= 0x2000 && r <= 0x200A, r == 0x2028, r == 0x2029, r == 0x202F, r == 0x205F, r == 0x3000:
		return true
	}
	return false
}

// DebugString is s as Rust's <str as Debug> writes it: in double quotes,
// with \0 \t \r \n \\ \" escaped by a backslash, and every grapheme-extending
// or unprintable character as \u{hex} (lowercase, no leading zeros). The
// single quote is not escaped. Unprintable is Rust's core::unicode::printable:
// the categories Cc, Cf, Cs, Co, Zl, Zp, unassigned code points, and the
// space separators other than U+0020; Grapheme_Extend is Mn, Me and
// Other_Grapheme_Extend. Go's tables (Unicode 15.0 here) decide them, so a
// code point assigned by a later Unicode than Go's but known to Rust's may
// differ. An invalid UTF-8 byte, which a Rust string cannot hold, is written
// as \u{fffd}, the character Go reads it as.
func DebugString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch r {
		case 0:
			b.WriteString(`\0`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		case '\n':
			b.WriteString(`\n`)
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		default:
			if graphemeExtend(r) || !printable(r) {
				fmt.Fprintf(&b, `\u{%x}`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

func graphemeExtend(r rune) bool {
	return r >= 0x300 && unicode.In(r, unicode.Mn, unicode.Me, unicode.Other_Grapheme_Extend)
}

func printable(r rune) bool {
	if r >= 0x20 && r < 0x7F {
		return true
	}
	if r == utf8.RuneError {
		return true // U+FFFD REPLACEMENT CHARACTER is So, printable
	}
	if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Cs, unicode.Co, unicode.Zl, unicode.Zp, unicode.Zs) {
		return false
	}
	return unicode.In(r, unicode.L, unicode.M, unicode.N, unicode.P, unicode.S)
}

func marshalString(s string) (string, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return "", err
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}

func compactJSON(raw json.RawMessage) (string, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return "", err
	}
	return buf.String(), nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
