// Package docstest runs the documentation: every shell block of README.md
// and docs/*.md marked runnable is executed, in order, in one bash session
// per file, against a fresh contextd server, and the output a page shows
// after a block is compared with what the block printed. A page that no
// longer describes the program fails `make docs-test` at its line.
//
// The markers (CONTRIBUTING.md, "Docs that run"):
//
//   - a fenced block whose info string is "sh run" (or "bash run") is run;
//     any other block is text;
//   - the next fenced block after a run block, when its info string is
//     "text output", is the output that block prints (standard output and
//     standard error together), compared line by line with trailing white
//     space ignored: "..." in a line matches any run of characters of that
//     line, and a line that is "..." alone matches any number of lines.
package docstest

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Block is one runnable shell block of a page, with the output the page
// shows for it.
type Block struct {
	File string // as given to Parse (relative to the repository root)
	Line int    // the line of the opening fence, 1-based
	Code string // the block's text, its fence's indentation removed
	// Output is the expected output ("" and HasOutput false: not shown).
	Output     string
	HasOutput  bool
	OutputLine int // the line of the output block's opening fence
}

// Where is the block's position as an editor takes it: file:line.
func (b Block) Where() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// fence is one fenced code block of a page.
type fence struct {
	line int
	info []string // the info string's words
	text string
}

// runnable reports whether a fence is a block to run: sh or bash, then run.
func (f fence) runnable() bool {
	return len(f.info) >= 2 && (f.info[0] == "sh" || f.info[0] == "bash") && f.info[1] == "run"
}

// output reports whether a fence is a block's expected output.
func (f fence) output() bool {
	return len(f.info) >= 2 && f.info[0] == "text" && f.info[1] == "output"
}

// Parse returns the runnable blocks of one page, in order. An output block
// that follows no run block, or a fence that is never closed, is an error
// naming its line: a marker that does nothing would be a test that never
// fails.
func Parse(file, src string) ([]Block, error) {
	fences, err := fences(file, src)
	if err != nil {
		return nil, err
	}
	var blocks []Block
	for i, f := range fences {
		switch {
		case f.runnable():
			blocks = append(blocks, Block{File: file, Line: f.line, Code: f.text})
		case f.output():
			if i == 0 || !fences[i-1].runnable() {
				return nil, fmt.Errorf("%s:%d: a \"text output\" block must follow a \"sh run\" block (the next fenced block after it)", file, f.line)
			}
			b := &blocks[len(blocks)-1]
			b.Output, b.HasOutput, b.OutputLine = f.text, true, f.line
		}
	}
	return blocks, nil
}

// fences reads every fenced code block (``` or ~~~, three or more, at any
// indentation, so blocks inside list items count too).
func fences(file, src string) ([]fence, error) {
	lines := strings.Split(src, "\n")
	var out []fence
	for i := 0; i < len(lines); i++ {
		indent, marker, info, ok := openFence(lines[i])
		if !ok {
			continue
		}
		start := i
		var body []string
		closed := false
		for i++; i < len(lines); i++ {
			if closesFence(lines[i], marker) {
				closed = true
				break
			}
			body = append(body, strings.TrimPrefix(lines[i], indent))
		}
		if !closed {
			return nil, fmt.Errorf("%s:%d: fenced block is never closed", file, start+1)
		}
		text := strings.Join(body, "\n")
		if len(body) > 0 {
			text += "\n"
		}
		out = append(out, fence{line: start + 1, info: strings.Fields(info), text: text})
	}
	return out, nil
}

// openFence recognises an opening fence: its indentation, its marker (the
// run of backticks or tildes) and its info string.
func openFence(line string) (indent, marker, info string, ok bool) {
	trimmed := strings.TrimLeft(line, " \t")
	indent = line[:len(line)-len(trimmed)]
	for _, c := range []string{"`", "~"} {
		n := 0
		for n < len(trimmed) && trimmed[n:n+1] == c {
			n++
		}
		if n >= 3 {
			info = trimmed[n:]
			if c == "`" && strings.Contains(info, "`") {
				return "", "", "", false // an inline code span, not a fence
			}
			return indent, trimmed[:n], strings.TrimSpace(info), true
		}
	}
	return "", "", "", false
}

// closesFence reports whether line closes a fence opened with marker: the
// same character, at least as many, nothing but white space after.
func closesFence(line, marker string) bool {
	t := strings.TrimSpace(line)
	if len(t) < len(marker) || strings.Trim(t, marker[:1]) != "" {
		return false
	}
	return true
}

// Pages returns README.md and every docs/*.md under root, relative to it,
// README first, then by name.
func Pages(root string) ([]string, error) {
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	pages := []string{"README.md"}
	var rest []string
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			return nil, err
		}
		rest = append(rest, filepath.ToSlash(rel))
	}
	sort.Strings(rest)
	pages = append(pages, rest...)
	for _, p := range pages {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			return nil, err
		}
	}
	return pages, nil
}
