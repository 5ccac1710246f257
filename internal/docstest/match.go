package docstest

import (
	"fmt"
	"regexp"
	"strings"
)

// Placeholder stands for what changes from run to run (ids, times, keys):
// inside a line it matches any run of that line's characters; a line that
// is Placeholder alone matches any number of whole lines, none included.
const Placeholder = "..."

// Match reports whether got is the output want shows, line by line, with
// trailing white space of lines and trailing blank lines ignored and
// Placeholder matching what it stands for.
func Match(want, got string) bool {
	return pattern(want).MatchString(normalize(got))
}

// pattern is want as an anchored regular expression over normalized text.
func pattern(want string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`\A`)
	var lines []string
	if n := normalize(want); n != "" {
		lines = strings.Split(strings.TrimSuffix(n, "\n"), "\n")
	}
	for _, line := range lines {
		if line == Placeholder {
			b.WriteString(`(?:[^\n]*\n)*?`)
			continue
		}
		parts := strings.Split(line, Placeholder)
		for i, p := range parts {
			if i > 0 {
				b.WriteString(`[^\n]*?`)
			}
			b.WriteString(regexp.QuoteMeta(p))
		}
		b.WriteString(`\n`)
	}
	b.WriteString(`\z`)
	return regexp.MustCompile(b.String())
}

// normalize removes trailing white space from every line and trailing
// blank lines, and ends the text with one line feed ("" for no text).
func normalize(s string) string {
	lines := strings.Split(strings.ReplaceAll(s, "\r\n", "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t\r")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) == 0 {
		return ""
	}
	return strings.Join(lines, "\n") + "\n"
}

// FirstDifference says where got first departs from want, for a failure's
// message: the line of want (1-based) and both lines, or "" when it cannot
// tell (past a line of Placeholder alone, which may match any lines).
func FirstDifference(want, got string) string {
	w := strings.Split(strings.TrimSuffix(normalize(want), "\n"), "\n")
	g := strings.Split(strings.TrimSuffix(normalize(got), "\n"), "\n")
	for i, line := range w {
		if line == Placeholder {
			return ""
		}
		if i >= len(g) {
			return fmt.Sprintf("line %d of the output is missing: want %q", i+1, line)
		}
		if !pattern(line).MatchString(g[i] + "\n") {
			return fmt.Sprintf("line %d of the output: want %q, got %q", i+1, line, g[i])
		}
	}
	if len(g) > len(w) {
		return fmt.Sprintf("line %d of the output is one too many: %q", len(w)+1, g[len(w)])
	}
	return ""
}
