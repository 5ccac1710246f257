package ctxtype

import (
	"strconv"
	"strings"
)

// maxNumericScale is the most digits PostgreSQL's numeric keeps after the
// point (NUMERIC_DSCALE_MAX); a JSON number needing more cannot be stored
// in jsonb at all ("value overflows numeric format").
const maxNumericScale = 16383

// MaxNumberBytes bounds a number of a free-form document (agent_context,
// variables, item metadata) written out as jsonb stores it: 1e131071 is 9
// bytes sent and 131,072 stored.
const MaxNumberBytes = 1000

// StoredNumber is the JSON number n as jsonb stores and prints it, if its
// form is at most MaxNumberBytes (pgNumeric).
func StoredNumber(n string) (string, bool) { return pgNumeric(n, MaxNumberBytes) }

// pgNumeric is the JSON number n as jsonb stores and prints it: PostgreSQL's
// numeric in plain notation, the exponent applied, as many digits after the
// point as n's own minus its exponent (1.50 stays 1.50, 1e2 is 100, 1.5e-3
// is 0.0015, -0 is 0). Free-form documents are measured, hashed, compared
// and rendered in this form (CheckDocument), so that what a read or a
// replay finds is what was measured or rendered, and writing it back is no
// change. ok is false when the form would be longer than limit
// bytes or need more than maxNumericScale digits after the point: such a
// number is refused before anything builds it (1e131071 is 9 bytes sent
// and 131,072 stored). n must be a valid JSON number.
func pgNumeric(n string, limit int) (string, bool) {
	neg := strings.HasPrefix(n, "-")
	n = strings.TrimPrefix(n, "-")
	mant, exp := n, 0
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		mant = n[:i]
		e, err := strconv.Atoi(strings.TrimPrefix(n[i+1:], "+"))
		if err != nil {
			e = 1 << 40 // past int: past any limit either way
			if strings.HasPrefix(n[i+1:], "-") {
				e = -e
			}
		}
		e = min(max(e, -(1<<40)), 1<<40) // keeps the arithmetic below in range
		exp = e
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := intPart + frac
	if strings.Trim(digits, "0") == "" { // zero: its scale alone is kept
		return zeroWithScale(max0(len(frac)-exp), limit)
	}
	scale := max0(len(frac) - exp)
	point := len(intPart) + exp // where the point falls in digits
	if scale > maxNumericScale {
		return "", false
	}
	var whole, fraction string
	switch {
	case point >= len(digits):
		if point-len(digits) > limit {
			return "", false
		}
		whole = digits + strings.Repeat("0", point-len(digits))
	case point <= 0:
		whole, fraction = "0", strings.Repeat("0", -point)+digits
	default:
		whole, fraction = digits[:point], digits[point:]
	}
	whole = strings.TrimLeft(whole, "0")
	if whole == "" {
		whole = "0"
	}
	out := whole
	if scale > 0 {
		out += "." + fraction
	}
	if neg {
		out = "-" + out
	}
	if len(out) > limit {
		return "", false
	}
	return out, true
}

func max0(n int) int { return max(n, 0) }

// zeroWithScale is zero as numeric prints it with scale digits after the point.
func zeroWithScale(scale, limit int) (string, bool) {
	if scale > maxNumericScale || scale+2 > limit {
		return "", false
	}
	if scale == 0 {
		return "0", true
	}
	return "0." + strings.Repeat("0", scale), true
}
