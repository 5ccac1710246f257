// Package render turns an assembled packet into text: markdown (KXM's packet
// v2 layout), blocks (navi's "=== External Context Packets ===" block) or
// json. It owns the document a packet shows (Doc), one writer per format,
// and the per-part texts the budget counts. It is pure and deterministic:
// the same Doc gives the same bytes, and nothing random or time-dependent
// is ever written. Output is a list of pieces, each either scaffolding or
// the block of one record, so the caller can compute byte spans that cover
// the text exactly once.
package render

import (
	"strings"

	"github.com/contextd/contextd/internal/ctxtype"
)

// Scaffold is the Ref of a piece that belongs to no record: headings and
// separators, which the packet itself accounts for.
const Scaffold = -1

// Piece is a run of output text and the record it belongs to, so that the
// caller can give every record the byte span of its block.
type Piece struct {
	Text string
	Ref  int // index of a record, or Scaffold
}

// Render returns the pieces of doc in format f; an unknown format renders
// as markdown, the default.
func Render(f ctxtype.Format, doc *Doc) []Piece {
	var w writer
	switch f {
	case ctxtype.Blocks:
		renderBlocks(&w, doc)
	case ctxtype.JSON:
		renderJSON(&w, doc)
	case ctxtype.KXM:
		renderKXM(&w, doc)
	case ctxtype.Navi:
		renderNavi(&w, doc)
	default:
		renderMarkdown(&w, doc)
	}
	return w.pieces
}

// Text concatenates pieces: the packet as the agent reads it.
func Text(pieces []Piece) string {
	n := 0
	for _, p := range pieces {
		n += len(p.Text)
	}
	// One allocation of the text's size: grown by doubling, a packet's
	// ~45 KB took ~130 KB of garbage.
	var b strings.Builder
	b.Grow(n)
	for _, p := range pieces {
		b.WriteString(p.Text)
	}
	return b.String()
}

// writer collects pieces; adjacent scaffolding merges into one piece, as
// no record needs its boundaries.
type writer struct{ pieces []Piece }

func (w *writer) add(ref int, text string) {
	if text == "" {
		return
	}
	if n := len(w.pieces); n > 0 && w.pieces[n-1].Ref == ref && ref == Scaffold {
		w.pieces[n-1].Text += text
		return
	}
	w.pieces = append(w.pieces, Piece{Text: text, Ref: ref})
}

// HeadingCost returns the text a section's first entry brings with it, for
// budgeting: its heading, and the Environment & Memory heading when it is
// the first environment section to appear.
func HeadingCost(f ctxtype.Format, section string, envStarted bool) string {
	switch f {
	case ctxtype.Markdown:
		return markdownHeading(section, envStarted)
	case ctxtype.JSON:
		return "\n,{\"name\":" + jsonString(section) + ",\"entries\":[\n]}"
	case ctxtype.Navi:
		return naviHeading(section)
	}
	return ""
}

// EntryCost returns the text an entry adds, for budgeting.
func EntryCost(f ctxtype.Format, e Entry) string {
	switch f {
	case ctxtype.Blocks:
		return blocksEntry(e) + "\n"
	case ctxtype.JSON:
		return "," + jsonEntry(e) + "\n"
	case ctxtype.KXM:
		return "," + kxmEntry(e, "", "")
	case ctxtype.Navi:
		return naviEntry(e) + "\n"
	}
	return MarkdownItemBlock(e.Title, e.Content)
}

// ContradictionCost returns the text a contradiction line adds, for budgeting.
func ContradictionCost(f ctxtype.Format, c Contradiction) string {
	switch f {
	case ctxtype.Blocks:
		return blocksContradiction(c) + "\n"
	case ctxtype.JSON:
		return "," + jsonContradiction(c) + "\n"
	case ctxtype.KXM:
		return "," + kxmContradiction(c, "")
	case ctxtype.Navi:
		return markdownContradiction(c)
	}
	return markdownContradiction(c)
}
