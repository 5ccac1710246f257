package item

import (
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/validation"
)

var backticked = regexp.MustCompile("`([^`]+)`")

// TestAuthorityTable reads the table of docs/authority.md and checks every
// row against DefaultAuthority, for every kind and source it names ("any
// other" is every source of the vocabulary no other row names, and an
// other:<tag>), and that the rows together cover every kind, source and
// grant exactly once: the page is the rule.
func TestAuthorityTable(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("../../docs/authority.md")
	require.NoError(t, err)
	type row struct {
		kinds, sources []string
		other          bool
		grant, want    string
	}
	var rows []row
	named := map[string]bool{}
	for _, line := range strings.Split(string(doc), "\n") {
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if !strings.HasPrefix(line, "| `") || len(cells) != 4 {
			continue
		}
		r := row{kinds: ticks(cells[0]), grant: ticks(cells[2])[0], want: ticks(cells[3])[0]}
		if strings.HasPrefix(cells[1], "any other") {
			r.other = true
		} else {
			r.sources = ticks(cells[1])
			for _, s := range r.sources {
				named[s] = true
			}
		}
		rows = append(rows, r)
	}
	require.Len(t, rows, 24, "two kinds of kind, three of source, four grants")
	var others []string
	for s := range sources {
		if !named[s] {
			others = append(others, s)
		}
	}
	slices.Sort(others)
	others = append(others, "other:x")
	covered := map[[3]string]int{}
	for i, r := range rows {
		srcs := r.sources
		if r.other {
			srcs = others
		}
		for _, k := range r.kinds {
			require.True(t, ValidKind(k), "row %d: %s is a kind", i, k)
			for _, s := range srcs {
				require.True(t, ValidSource(s), "row %d: %s is a source", i, s)
				require.Equal(t, r.want, DefaultAuthority(k, s, r.grant), "row %d: kind %s, source %s, grant %s", i, k, s, r.grant)
				covered[[3]string{k, s, r.grant}]++
			}
		}
	}
	for k := range kinds {
		for _, s := range append(slices.Sorted(maps.Keys(sources)), "other:x") {
			for _, g := range []string{auth.Policy, auth.Instruction, auth.Evidence, auth.Hypothesis} {
				require.Equal(t, 1, covered[[3]string{k, s, g}], "kind %s, source %s, grant %s: one row", k, s, g)
			}
		}
	}
}

func ticks(cell string) []string {
	var out []string
	for _, m := range backticked.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// TestDefaultAuthorityIsTheWriters: an omitted authority is filled for the
// writer (an admin's instruction is an instruction, not evidence; a
// hypothesis-only writer's item is a hypothesis, not refused), and a named
// one is kept and checked as before.
func TestDefaultAuthorityIsTheWriters(t *testing.T) {
	t.Parallel()
	kind := func(k string) *string { return &k }
	admin := &auth.Agent{Permission: auth.Admin}
	guess := &auth.Agent{Permission: auth.Edit, MaxAuthority: auth.Hypothesis}
	for _, tc := range []struct {
		agent *auth.Agent
		in    Input
		want  string
	}{
		{admin, Input{Kind: kind("instruction")}, auth.Instruction},
		{admin, Input{Kind: kind("instruction"), Source: kind("human")}, auth.Instruction},
		{admin, Input{Kind: kind("instruction"), Source: kind("rag")}, auth.Evidence},
		{admin, Input{}, auth.Evidence},
		{guess, Input{Kind: kind("instruction")}, auth.Hypothesis},
		{admin, Input{Kind: kind("instruction"), Authority: kind("hypothesis")}, auth.Hypothesis},
	} {
		tc.in.Key, tc.in.Content = "k", "text"
		var errs validation.List
		f := tc.in.normalize("", &errs)
		require.NoError(t, errs.Err())
		defaultAuthority(tc.agent, &f)
		require.Equal(t, tc.want, f.Authority, "%+v", tc.in)
		require.NoError(t, tc.agent.CheckAuthority([]auth.Claim{{Authority: f.Authority, Source: f.Source}}))
	}
	// An explicit empty authority is still refused by validation.
	var errs validation.List
	empty := ""
	(&Input{Key: "k", Content: "x", Authority: &empty}).normalize("", &errs)
	require.Error(t, errs.Err())
}
