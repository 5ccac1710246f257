package docstest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	t.Parallel()
	src := "# Page\n\n```sh\nmake run\n```\n\n```sh run\necho one\n```\n\nIt prints:\n\n```text output\none\n```\n\n" +
		"- a list item\n\n  ```bash run\n  echo two\n    indented\n  ```\n\n````text\n```sh run\nnot a block\n```\n````\n"
	blocks, err := Parse("p.md", src)
	require.NoError(t, err)
	require.Len(t, blocks, 2)
	require.Equal(t, Block{File: "p.md", Line: 7, Code: "echo one\n", Output: "one\n", HasOutput: true, OutputLine: 13}, blocks[0])
	require.Equal(t, Block{File: "p.md", Line: 19, Code: "echo two\n  indented\n"}, blocks[1])
	require.Equal(t, "p.md:19", blocks[1].Where())
}

func TestParseRefusesMarkersThatDoNothing(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]string{
		"output first":          "```text output\nx\n```\n",
		"output after text":     "```sh run\necho\n```\n```sh\nx\n```\n```text output\nx\n```\n",
		"fence never closed":    "```sh run\necho\n",
		"output after output":   "```sh run\necho\n```\n```text output\nx\n```\n```text output\ny\n```\n",
		"shorter closing fence": "````sh run\necho\n```\n",
	} {
		_, err := Parse("p.md", src)
		require.Error(t, err, name)
		require.Contains(t, err.Error(), "p.md:", name)
	}
}

// TestPagesHaveRunnableBlocks keeps the markers honest in `make test`,
// where the pages are not run: every page parses, and the README's
// Quickstart is runnable and shows output to compare.
func TestPagesHaveRunnableBlocks(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	pages, err := Pages(root)
	require.NoError(t, err)
	for _, page := range pages {
		src, err := os.ReadFile(filepath.Join(root, page))
		require.NoError(t, err)
		blocks, err := Parse(page, string(src))
		require.NoError(t, err)
		if page != "README.md" {
			continue
		}
		outputs := 0
		for _, b := range blocks {
			if b.HasOutput {
				outputs++
			}
		}
		require.GreaterOrEqual(t, len(blocks), 5, "the README's Quickstart is run by make docs-test: its blocks must be marked ```sh run")
		require.GreaterOrEqual(t, outputs, 3, "the README shows output for its main steps, marked ```text output")
	}
}

// TestReadmeIsAFrontDoor keeps the README short: what contextd is, the
// prerequisites, the two commands, the Quickstart and the map; the rest
// belongs to a page of docs/.
func TestReadmeIsAFrontDoor(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	lines := strings.Count(string(src), "\n")
	require.LessOrEqual(t, lines, 300, "README.md has %d lines; move reference material to a page of docs/ and link it from the map", lines)
}
