package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode/utf8"
)

// CanonicalJSON is the one encoding of a JSON value whatever wrote it:
// objects with their members sorted by key (bytewise), no white space,
// strings escaped only where JSON requires it (", \ and control
// characters; everything else as UTF-8), numbers as their exact decimal
// value in shortest form (mantissa digits without leading or trailing
// zeros, and an exponent: 1.50, 15e-1 and 0.15e1 are all "15e-1"; 100 is
// "1e2"; 0 is "0"). PostgreSQL's jsonb keeps neither member order nor
// white space, and the service and the database write numbers differently;
// their canonical forms are equal when the values are.
func CanonicalJSON(raw []byte) ([]byte, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("canonical json: %w", err)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, fmt.Errorf("canonical json: more than one value")
	}
	var b bytes.Buffer
	if err := canonical(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func canonical(b *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		if v {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case json.Number:
		n, err := canonicalNumber(string(v))
		if err != nil {
			return err
		}
		b.WriteString(n)
	case string:
		canonicalString(b, v)
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := canonical(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			canonicalString(b, k)
			b.WriteByte(':')
			if err := canonical(b, v[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("canonical json: unexpected %T", v)
	}
	return nil
}

func canonicalString(b *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	// Runs of printable ASCII other than " and \ go as they are, in one
	// write each: every packet's ~80 records are canonicalised for its
	// chain entry, and went a rune at a time.
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c < utf8.RuneSelf && c != '"' && c != '\\' {
			i++
			continue
		}
		b.WriteString(s[start:i])
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
			i++
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b.WriteString("\ufffd") // U+FFFD itself, as encoding/json reads the byte: one encoding per value
			} else {
				b.WriteString(s[i : i+size])
			}
			i += size
		}
		start = i
	}
	b.WriteString(s[start:])
	b.WriteByte('"')
}

// canonicalNumber is a JSON number's exact value as digits and exponent
// (see CanonicalJSON).
// maxExponent bounds a number's written exponent, so that shifting it by
// the mantissa's digits never wraps (PostgreSQL's numeric stops far
// sooner).
const maxExponent = 1 << 40

func canonicalNumber(s string) (string, error) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		if _, err := fmt.Sscanf(s[i+1:], "%d", &exp); err != nil || exp > maxExponent || exp < -maxExponent { // %d: decimal, so 1e010 is 1e10 (Sscan would read 010 as octal)
			return "", fmt.Errorf("canonical json: number %q (exponents beyond ±%d are refused: they would wrap)", s, maxExponent)
		}
	}
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		exp -= len(mant) - i - 1
		mant = mant[:i] + mant[i+1:]
	}
	mant = strings.TrimLeft(mant, "0")
	for strings.HasSuffix(mant, "0") {
		mant = mant[:len(mant)-1]
		exp++
	}
	if mant == "" {
		return "0", nil
	}
	out := mant
	if neg {
		out = "-" + out
	}
	if exp != 0 {
		out += fmt.Sprintf("e%d", exp)
	}
	return out, nil
}

// String is a string as bodies and CanonicalJSON write it.
func String(s string) []byte {
	var b bytes.Buffer
	canonicalString(&b, s)
	return b.Bytes()
}
