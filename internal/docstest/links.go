package docstest

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"
)

var (
	headingRE    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	linkRE       = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)\)`)
	inlineCodeRE = regexp.MustCompile("`[^`]*`")
)

// prose is a page without its fenced blocks: each line, or "" for a line
// inside a fence, so line numbers stay the page's.
func prose(src string) []string {
	lines := strings.Split(src, "\n")
	out := make([]string, len(lines))
	var marker string
	for i, l := range lines {
		if marker != "" {
			if closesFence(l, marker) {
				marker = ""
			}
			continue
		}
		if _, m, _, ok := openFence(l); ok {
			marker = m
			continue
		}
		out[i] = l
	}
	return out
}

// Anchors are the fragment ids GitHub gives a page's headings: lower case,
// punctuation dropped, spaces as hyphens, a repeated one numbered.
func Anchors(src string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, l := range prose(src) {
		m := headingRE.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		slug := Slug(m[1])
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// Slug is a heading's GitHub anchor.
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// BrokenLinks checks the relative links of a page (file is relative to
// root): the file each names exists, and a fragment into a markdown page is
// one of its headings. Links to other sites are not followed.
func BrokenLinks(root, file, src string) []string {
	var out []string
	for i, l := range prose(src) {
		for _, m := range linkRE.FindAllStringSubmatch(inlineCodeRE.ReplaceAllString(l, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if msg := checkLink(root, file, src, target); msg != "" {
				out = append(out, fmt.Sprintf("%s:%d: %s: %s", file, i+1, target, msg))
			}
		}
	}
	return out
}

func checkLink(root, file, src, target string) string {
	p, frag, _ := strings.Cut(target, "#")
	page := src
	if p != "" {
		rel := path.Join(path.Dir(file), p)
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			return "no such file"
		}
		page = string(b)
		if !strings.HasSuffix(p, ".md") {
			return ""
		}
	}
	if frag != "" && !Anchors(page)[frag] {
		return "no such heading"
	}
	return ""
}
