package docstest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSlug(t *testing.T) {
	t.Parallel()
	for heading, slug := range map[string]string{
		"Bounded assembly (pipeline 2)":          "bounded-assembly-pipeline-2",
		"navi's ContextPacket":                   "navis-contextpacket",
		"A 100,000-item project":                 "a-100000-item-project",
		"A packet's records in agentfootprint's": "a-packets-records-in-agentfootprints",
		"`contextd` and `_shared`":               "contextd-and-_shared",
	} {
		require.Equal(t, slug, Slug(heading), heading)
	}
}

func TestBrokenLinksFindsWhatIsMissing(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "docs"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "docs", "b.md"), []byte("# B\n\n## Two words\n## Two words\n"), 0o644))
	src := "# A\n[ok](b.md#two-words) [ok](b.md#two-words-1) [self](#a) [web](https://x.invalid/#y)\n" +
		"[bad](b.md#three) [gone](c.md) [self](#nope)\n```\n[in a fence](nowhere.md)\n```\n`[in code](nowhere.md)`\n"
	require.Equal(t, []string{
		"docs/a.md:3: b.md#three: no such heading",
		"docs/a.md:3: c.md: no such file",
		"docs/a.md:3: #nope: no such heading",
	}, BrokenLinks(root, "docs/a.md", src))
}

// TestLinks: every relative link of the README, CONTRIBUTING.md and
// docs/*.md names a file that exists and, into a page, a heading it has.
func TestLinks(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	pages, err := Pages(root)
	require.NoError(t, err)
	var broken []string
	for _, page := range append(pages, "CONTRIBUTING.md") {
		src, err := os.ReadFile(filepath.Join(root, page))
		require.NoError(t, err)
		broken = append(broken, BrokenLinks(root, page, string(src))...)
	}
	require.Empty(t, broken, "broken links:\n%s", strings.Join(broken, "\n"))
}
