package render

import (
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// AgentContextText renders a host's state generically: keys in sorted
// order, nested objects as indented "key: value" lines, each array element
// as one line of its fields, and an empty array as "No <key in words> loaded."
func AgentContextText(ctx map[string]any) string {
	var b strings.Builder
	writeObject(&b, ctx, "")
	return b.String()
}

func writeObject(b *strings.Builder, obj map[string]any, indent string) {
	for _, k := range sortedKeys(obj) {
		switch v := obj[k].(type) {
		case map[string]any:
			if len(v) == 0 {
				b.WriteString(indent + k + ": (none)\n")
				continue
			}
			b.WriteString(indent + k + ":\n")
			writeObject(b, v, indent+"  ")
		case []any:
			if len(v) == 0 {
				b.WriteString(indent + "No " + keyWords(k) + " loaded.\n")
				continue
			}
			b.WriteString(indent + k + ":\n")
			for _, el := range v {
				b.WriteString(indent + "  - " + inline(el) + "\n")
			}
		default:
			b.WriteString(indent + k + ": " + scalar(v, indent+"  ") + "\n")
		}
	}
}

// inline renders one array element on one line: an object as its fields,
// "k: v" joined by ", ", in key order.
func inline(v any) string {
	obj, ok := v.(map[string]any)
	if ok && len(obj) == 0 {
		return "(none)"
	}
	if !ok {
		if arr, ok := v.([]any); ok {
			parts := make([]string, len(arr))
			for i, el := range arr {
				parts[i] = inline(el)
			}
			return "[" + strings.Join(parts, ", ") + "]"
		}
		return oneLine(scalar(v, ""))
	}
	parts := make([]string, 0, len(obj))
	for _, k := range sortedKeys(obj) {
		val := obj[k]
		switch x := val.(type) {
		case map[string]any, []any:
			parts = append(parts, k+": "+canonicalJSON(x))
		default:
			parts = append(parts, k+": "+oneLine(scalar(x, "")))
		}
	}
	return strings.Join(parts, ", ")
}

func scalar(v any, indent string) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		ls := lines(x)
		return strings.Join(ls, "\n"+indent)
	case bool:
		return strconv.FormatBool(x)
	case json.Number:
		return CanonicalNumber(x)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

// CanonicalNumber writes a JSON number the same way whatever its source
// spelling (1e2, 100, 100.0 from jsonb), so that a replayed packet, whose
// request came back from the database, renders the same bytes.
func CanonicalNumber(n json.Number) string {
	if i, err := n.Int64(); err == nil {
		return strconv.FormatInt(i, 10)
	}
	if !strings.ContainsAny(string(n), ".eE") {
		// An integer beyond 64 bits: its digits, exactly.
		if i, ok := new(big.Int).SetString(string(n), 10); ok {
			return i.String()
		}
	}
	// An integer written with a fraction or an exponent (1e15, 2.0E3) is
	// its digits too: PostgreSQL's jsonb gives it back as digits, and a
	// replay must render what the assembly did. Exponents are bounded as
	// PostgreSQL bounds them, so the exact value stays cheap.
	if smallExponent(string(n)) {
		if r, ok := new(big.Rat).SetString(string(n)); ok && r.IsInt() {
			return r.Num().String()
		}
	}
	if f, err := n.Float64(); err == nil {
		if f == float64(int64(f)) && f > -1e15 && f < 1e15 {
			return strconv.FormatInt(int64(f), 10)
		}
		if f == math.Trunc(f) && !math.IsInf(f, 0) {
			// Integral once rounded to a float64: its digits, so that
			// rendering the output again gives the output.
			return new(big.Float).SetFloat64(f).Text('f', 0)
		}
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	return n.String()
}

// smallExponent reports whether a number's exponent, if any, is within
// what PostgreSQL's numeric holds (131,072 digits before the point,
// 16,383 after), which bounds the exact value's cost; jsonb refuses the
// rest.
func smallExponent(n string) bool {
	i := strings.IndexAny(n, "eE")
	if i < 0 {
		return true
	}
	e, err := strconv.Atoi(strings.TrimPrefix(n[i+1:], "+"))
	return err == nil && e >= -16383 && e <= 131072
}

// keyWords turns a key into words: mediaAssets and media_assets both give
// "media assets".
func keyWords(k string) string {
	var words []string
	var cur []rune
	rs := []rune(k)
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	// acronymEnd: at rs[i], an upper-case letter that ends an acronym and
	// starts a word ("HTTPServers" → HTTP, Servers), unless all that
	// follows is a plural s ("selectedIDs" → selected, IDs).
	acronymEnd := func(i int) bool {
		if i == 0 || i+1 >= len(rs) || !unicode.IsUpper(rs[i-1]) || !unicode.IsLower(rs[i+1]) {
			return false
		}
		return !(rs[i+1] == 's' && (i+2 == len(rs) || !unicode.IsLower(rs[i+2])))
	}
	for i, r := range rs {
		switch {
		case r == '_' || r == '-' || unicode.IsSpace(r):
			flush()
		case unicode.IsUpper(r) && i > 0 && (unicode.IsLower(rs[i-1]) || unicode.IsDigit(rs[i-1]) || acronymEnd(i)):
			flush()
			cur = append(cur, r)
		default:
			cur = append(cur, r)
		}
	}
	flush()
	return strings.Join(words, " ")
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
