package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// decodeJSON is raw's value with numbers as written, or ok false.
func decodeJSON(raw []byte) (v any, ok bool) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if d.Decode(&v) != nil {
		return nil, false
	}
	return v, true
}

// exactNumber is a JSON number's exact value, independently of
// canonicalNumber: sign, significant digits (no leading or trailing
// zeros) and the exponent of the last digit, which may be any integer.
type exactNumber struct {
	neg    bool
	digits string
	exp    *big.Int
}

func parseExact(s string) (exactNumber, bool) {
	n := exactNumber{exp: new(big.Int)}
	if strings.HasPrefix(s, "-") {
		n.neg, s = true, s[1:]
	}
	mant := s
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		mant = s[:i]
		if _, ok := n.exp.SetString(strings.TrimPrefix(s[i+1:], "+"), 10); !ok {
			return n, false
		}
	}
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		n.exp.Sub(n.exp, big.NewInt(int64(len(mant)-i-1)))
		mant = mant[:i] + mant[i+1:]
	}
	mant = strings.TrimLeft(mant, "0")
	for strings.HasSuffix(mant, "0") {
		mant = mant[:len(mant)-1]
		n.exp.Add(n.exp, big.NewInt(1))
	}
	n.digits = mant
	if mant == "" {
		return exactNumber{exp: new(big.Int)}, true // 0 and -0 are one value
	}
	return n, true
}

func (n exactNumber) equal(m exactNumber) bool {
	return n.neg == m.neg && n.digits == m.digits && n.exp.Cmp(m.exp) == 0
}

// plain writes n without an exponent, as PostgreSQL's numeric does, when
// that is short enough to write; ok false otherwise.
func (n exactNumber) plain() (string, bool) {
	if !n.exp.IsInt64() || n.exp.Int64() > 200 || n.exp.Int64() < -200 {
		return "", false
	}
	if n.digits == "" {
		return "0", true
	}
	e := int(n.exp.Int64())
	s := n.digits
	switch {
	case e >= 0:
		s += strings.Repeat("0", e)
	case -e < len(s):
		s = s[:len(s)+e] + "." + s[len(s)+e:] + "000" // trailing zeros, as numeric keeps a scale
	default:
		s = "0." + strings.Repeat("0", -e-len(s)) + s
	}
	if n.neg {
		s = "-" + s
	}
	return s, true
}

// sameValue compares two decoded JSON values, numbers by exact value.
func sameValue(a, b any) error {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		if !ok {
			return fmt.Errorf("number %s became %T", x, b)
		}
		nx, okx := parseExact(string(x))
		ny, oky := parseExact(string(y))
		if !okx || !oky || !nx.equal(ny) {
			return fmt.Errorf("number %s became %s", x, y)
		}
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return fmt.Errorf("object %v became %v", a, b)
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok {
				return fmt.Errorf("member %q is gone", k)
			}
			if err := sameValue(v, w); err != nil {
				return fmt.Errorf("%q: %w", k, err)
			}
		}
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return fmt.Errorf("array %v became %v", a, b)
		}
		for i := range x {
			if err := sameValue(x[i], y[i]); err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
		}
	default:
		if !reflect.DeepEqual(a, b) {
			return fmt.Errorf("%#v became %#v", a, b)
		}
	}
	return nil
}

// respell writes v again as another writer would: members in reverse
// order, white space, strings escaped as encoding/json does (HTML
// characters too) and numbers in plain notation where that is short.
func respell(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		// reverse bytewise order: the opposite of the canonical one
		for i := range keys {
			for j := i + 1; j < len(keys); j++ {
				if keys[j] > keys[i] {
					keys[i], keys[j] = keys[j], keys[i]
				}
			}
		}
		b.WriteString("{ ")
		for i, k := range keys {
			if i > 0 {
				b.WriteString(" ,\n")
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteString(" : ")
			respell(b, x[k])
		}
		b.WriteString(" }")
	case []any:
		b.WriteString("[\t")
		for i, e := range x {
			if i > 0 {
				b.WriteString(",\r\n")
			}
			respell(b, e)
		}
		b.WriteString("]")
	case json.Number:
		if n, ok := parseExact(string(x)); ok {
			if p, ok := n.plain(); ok {
				b.WriteString(p)
				return
			}
		}
		b.WriteString(string(x))
	default:
		e, _ := json.Marshal(x)
		b.Write(e)
	}
}

// FuzzCanonicalJSON: CanonicalJSON never panics; the same input gives the
// same bytes, error and SHA-256 twice; it accepts only JSON; its output is
// JSON of the same value, canonical itself (idempotent), free of white
// space outside strings, and the value written any other way (member
// order, white space, escapes, numbers in plain notation) has the same
// canonical form.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{
		`{"b":1,"a":[true,null]}`, `{ "n" : 1.50, "m": 15e-1, "o": 0.15E+1 }`, `[100, 1e2, 1E2, 100.000]`,
		`{"s":"a<b&c \u2028 \"q\" \\ \u0001 ü 中文 👍🏽"}`, `-0.000`, `"\ud800 lone surrogate"`,
		`{"a":{"a":{"a":[[],{},""]}}}`, `{"dup":1,"dup":2}`, `12345678901234567890.123456789e-30`,
		`{"mediaAssets":[{"id":"m1","name":"intro.mp4","type":"video","duration":12.5}],"playbackTimeMs":0}`,
		"{\"bad\":\"\xff\xfe\"}", `{"a":1} {"b":2}`, `[1,2`, ``, `   `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if len(raw) > 8192 {
			return
		}
		c1, err1 := CanonicalJSON(raw)
		c2, err2 := CanonicalJSON(raw)
		if !bytes.Equal(c1, c2) || fmt.Sprint(err1) != fmt.Sprint(err2) {
			t.Fatalf("same input, different output: %q %v / %q %v", c1, err1, c2, err2)
		}
		if sha256.Sum256(c1) != sha256.Sum256(c2) {
			t.Fatal("same input, different hash")
		}
		if err1 != nil {
			return
		}
		if !json.Valid(raw) {
			t.Fatalf("CanonicalJSON accepts %q, which is not JSON, as %q", raw, c1)
		}
		if !json.Valid(c1) || !utf8.Valid(c1) {
			t.Fatalf("output %q of %q is not JSON in UTF-8", c1, raw)
		}
		in, _ := decodeJSON(raw)
		out, ok := decodeJSON(c1)
		if !ok {
			t.Fatalf("output %q does not decode", c1)
		}
		if err := sameValue(in, out); err != nil {
			t.Fatalf("%q canonicalises to %q, another value: %v", raw, c1, err)
		}
		again, err := CanonicalJSON(c1)
		if err != nil || !bytes.Equal(again, c1) {
			t.Fatalf("not idempotent: %q gives %q, which gives %q (%v)", raw, c1, again, err)
		}
		inString, escaped := false, false
		for _, ch := range c1 {
			switch {
			case inString && escaped:
				escaped = false
			case inString && ch == '\\':
				escaped = true
			case ch == '"':
				inString = !inString
			case !inString && (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r'):
				t.Fatalf("white space outside strings in %q", c1)
			}
		}
		var b bytes.Buffer
		respell(&b, in)
		other, err := CanonicalJSON(b.Bytes())
		if err != nil || !bytes.Equal(other, c1) {
			t.Fatalf("the same value written otherwise canonicalises differently:\n%q → %q\n%q → %q (%v)", raw, c1, b.Bytes(), other, err)
		}
	})
}

// FuzzString: String is a JSON string that encoding/json decodes to the
// string (invalid UTF-8 read as U+FFFD, as encoding/json reads it),
// escaping only ", \ and control characters, and it agrees with
// CanonicalJSON: the canonical form of the string as any JSON writer
// writes it is String's bytes, and String of the decoded string is the
// same bytes (one encoding per value).
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "plain", `"quoted" \ back\slash`, "tab\tnl\ncr\r\x00\x1f\x7f", "ü 中文 👍🏽 \u2028\u2029",
		"a<b&c>", "\xff\xfe invalid \xc3\x28 utf8 \xe2\x82", "\ufffd replacement", "\ud7ff\ue000\U0010ffff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b := String(s)
		if !bytes.Equal(b, String(s)) {
			t.Fatalf("String(%q) is not deterministic", s)
		}
		if !json.Valid(b) || !utf8.Valid(b) {
			t.Fatalf("String(%q) = %q is not a JSON string in UTF-8", s, b)
		}
		var back string
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("String(%q) = %q does not decode: %v", s, b, err)
		}
		if want := string([]rune(s)); back != want {
			t.Fatalf("String(%q) = %q decodes to %q, want %q", s, b, back, want)
		}
		for i := 1; i < len(b)-1; i++ {
			if b[i] == '\\' {
				switch next := b[i+1]; {
				case next == '"' || next == '\\':
				case next == 'u' && i+5 < len(b) && string(b[i+2:i+4]) == "00" && b[i+4] <= '1':
				default:
					t.Fatalf("String(%q) = %q escapes more than JSON requires, at byte %d", s, b, i)
				}
				i++
			}
		}
		if again := String(back); !bytes.Equal(again, b) {
			t.Fatalf("one value, two encodings: String(%q) = %q, but String(%q) = %q", s, b, back, again)
		}
		m, _ := json.Marshal(s)
		if c, err := CanonicalJSON(m); err != nil || !bytes.Equal(c, b) {
			t.Fatalf("CanonicalJSON(%q) = %q (%v), but String(%q) = %q", m, c, err, s, b)
		}
		var old bytes.Buffer
		canonicalStringByRune(&old, s)
		if !bytes.Equal(old.Bytes(), b) {
			t.Fatalf("String(%q) = %q, but a rune at a time (the entries already chained) it was %q", s, b, old.Bytes())
		}
	})
}

// canonicalStringByRune is canonicalString as it was before its ASCII
// runs went in one write each: entries already chained were written by
// it, so the two must agree on every string.
func canonicalStringByRune(b *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteByte(byte(r))
		case r < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hex[r>>4])
			b.WriteByte(hex[r&0xf])
		case r == utf8.RuneError && size == 1:
			b.WriteString("\ufffd")
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	b.WriteByte('"')
}

// FuzzItemVersionBody: an entry body is the same bytes (and hash) for the
// same row, is one JSON object whose first member is "entry", holds every
// string column as written (as encoding/json reads it back), each JSON
// column as its CanonicalJSON, and fails exactly when a JSON column is not
// JSON. The redacted body of any subject is recognised as such.
func FuzzItemVersionBody(f *testing.F) {
	f.Add("acme", "refund-policy", "Refund policy", "Refunds within 14 days.\n- no questions\n", `{"keywords":["refund","money back"]}`, `{"ticket":"ORD-20391","n":1.50}`, int64(1767225600123456789), uint8(0))
	f.Add("_shared", "k:1", "", "中文文本 👍🏽 \u2028", `{"always":true}`, `{}`, int64(0), uint8(3))
	f.Add("p", "x", "\"quoted\"\t\\", "\xff\xfe invalid \xc3\x28", `{"tool":"search"}`, `{"a":[1e2,100,{"z":null}]}`, int64(-62135596800000000000/1000), uint8(5))
	f.Add("p", "bad-json", "t", "c", `{"always":`, `{}`, int64(42), uint8(7))
	f.Fuzz(func(t *testing.T, project, key, title, content, trigger, metadata string, at int64, flags uint8) {
		ts := time.Unix(0, at).In(time.FixedZone("x", int(flags)*1800))
		r := ItemVersionRow{Project: project, Key: key, Version: int(flags) + 1, Deleted: flags&1 != 0, Kind: "knowledge",
			Source: "project", Title: title, Summary: title + " " + key, Content: content, Priority: int(flags) - 100,
			Authority: "evidence", Confidence: "probable", StateKey: key, Slot: "system", Trigger: []byte(trigger),
			VisibleTo: []string{title, project}, HiddenFrom: []string{}, Template: flags&2 != 0, Metadata: []byte(metadata),
			Provenance: []byte(`{"derived_from":[]}`), FieldsSHA256: []byte(key), ContentSHA256: []byte(content),
			TokensO200k: len(content), CreatedAt: ts, CreatedBy: title}
		if flags&4 != 0 {
			r.ValidFrom = &ts
		}
		b1, err1 := ItemVersionBody(r)
		b2, err2 := ItemVersionBody(r)
		if !bytes.Equal(b1, b2) || fmt.Sprint(err1) != fmt.Sprint(err2) || !bytes.Equal(Hash(b1), Hash(b2)) {
			t.Fatalf("same row, different body: %q %v / %q %v", b1, err1, b2, err2)
		}
		ctrig, errT := CanonicalJSON(r.Trigger)
		cmeta, errM := CanonicalJSON(r.Metadata)
		if (err1 != nil) != (errT != nil || errM != nil) {
			t.Fatalf("body error %v, but trigger %v, metadata %v", err1, errT, errM)
		}
		if err1 != nil {
			return
		}
		if !json.Valid(b1) || !utf8.Valid(b1) || !bytes.HasPrefix(b1, []byte(`{"entry":"item_version",`)) {
			t.Fatalf("body is not a JSON object in UTF-8 led by its entry: %q", b1)
		}
		var got struct {
			Project, Key, Title, Summary string
			StateKey                     string   `json:"state_key"`
			CreatedBy                    string   `json:"created_by"`
			CreatedAt                    string   `json:"created_at"`
			ValidFrom                    *string  `json:"valid_from"`
			VisibleTo                    []string `json:"visible_to"`
			ContentSHA256Of              string   `json:"content_sha256_of"`
			Trigger, Metadata            json.RawMessage
		}
		if err := json.Unmarshal(b1, &got); err != nil {
			t.Fatal(err)
		}
		valid := func(s string) string { return string([]rune(s)) }
		sum := sha256.Sum256([]byte(content))
		if got.Project != valid(project) || got.Key != valid(key) || got.Title != valid(title) ||
			got.Summary != valid(title+" "+key) || got.StateKey != valid(key) || got.CreatedBy != valid(title) ||
			!reflect.DeepEqual(got.VisibleTo, []string{valid(title), valid(project)}) ||
			got.ContentSHA256Of != fmt.Sprintf("%x", sum) || got.CreatedAt != *Time(&ts) {
			t.Fatalf("body does not hold the row: %q", b1)
		}
		if (got.ValidFrom == nil) != (r.ValidFrom == nil) || (got.ValidFrom != nil && *got.ValidFrom != *Time(&ts)) {
			t.Fatalf("valid_from %v in %q", got.ValidFrom, b1)
		}
		if !bytes.Equal(got.Trigger, ctrig) || !bytes.Equal(got.Metadata, cmeta) {
			t.Fatalf("JSON columns are not canonical in %q", b1)
		}
		if utf8.ValidString(key) && utf8.ValidString(project) && project != "" {
			red := RedactedBody(KindItemVersion, ItemVersionSubject(key, r.Version), project)
			if redaction, subject, ok := redactedOf(red); !ok || redaction != project || subject != ItemVersionSubject(key, r.Version) {
				t.Fatalf("redacted body %q is not recognised: %q %q %v", red, redaction, subject, ok)
			}
			if _, _, ok := redactedOf(b1); ok {
				t.Fatalf("a full body %q reads as redacted", b1)
			}
		}
	})
}
