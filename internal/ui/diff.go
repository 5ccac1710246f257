package ui

import "strings"

// DiffLine is one line of a line diff: Op is " " (in both), "-" (only in
// the old text) or "+" (only in the new).
type DiffLine struct {
	Op   string
	Text string
}

// Class is the line's class in the stylesheet.
func (l DiffLine) Class() string {
	switch l.Op {
	case "+":
		return "dadd"
	case "-":
		return "ddel"
	}
	return "dsame"
}

// maxDiffCells bounds the table of a diff (old lines × new lines); past it
// the texts are shown as all removed, then all added, which is still a
// correct diff, only not the smallest.
const maxDiffCells = 4 << 20

// LineDiff is a shortest line diff of a and b (longest common subsequence
// of their lines).
func LineDiff(a, b string) []DiffLine {
	x, y := splitLines(a), splitLines(b)
	// Common head and tail cost nothing and shrink the table.
	head := 0
	for head < len(x) && head < len(y) && x[head] == y[head] {
		head++
	}
	tail := 0
	for tail < len(x)-head && tail < len(y)-head && x[len(x)-1-tail] == y[len(y)-1-tail] {
		tail++
	}
	var out []DiffLine
	for _, l := range x[:head] {
		out = append(out, DiffLine{" ", l})
	}
	out = append(out, lcsDiff(x[head:len(x)-tail], y[head:len(y)-tail])...)
	for _, l := range x[len(x)-tail:] {
		out = append(out, DiffLine{" ", l})
	}
	return out
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// lcsDiff diffs two line lists by dynamic programming: n[i][j] is the
// length of the longest common subsequence of x[i:] and y[j:].
func lcsDiff(x, y []string) []DiffLine {
	var out []DiffLine
	if len(x)*len(y) > maxDiffCells {
		for _, l := range x {
			out = append(out, DiffLine{"-", l})
		}
		for _, l := range y {
			out = append(out, DiffLine{"+", l})
		}
		return out
	}
	w := len(y) + 1
	n := make([]int, (len(x)+1)*w)
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				n[i*w+j] = n[(i+1)*w+j+1] + 1
			} else {
				n[i*w+j] = max(n[(i+1)*w+j], n[i*w+j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(x) && j < len(y) {
		switch {
		case x[i] == y[j]:
			out = append(out, DiffLine{" ", x[i]})
			i, j = i+1, j+1
		case n[(i+1)*w+j] >= n[i*w+j+1]:
			out = append(out, DiffLine{"-", x[i]})
			i++
		default:
			out = append(out, DiffLine{"+", y[j]})
			j++
		}
	}
	for ; i < len(x); i++ {
		out = append(out, DiffLine{"-", x[i]})
	}
	for ; j < len(y); j++ {
		out = append(out, DiffLine{"+", y[j]})
	}
	return out
}
