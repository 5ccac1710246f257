package render

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/stretchr/testify/require"
)

func TestKeyWords(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"mediaAssets": "media assets", "media_assets": "media assets", "HTTPServers": "http servers",
		"selectedIDs": "selected ids", "openTickets": "open tickets", "URL": "url", "v2Items": "v2 items",
	} {
		require.Equal(t, want, keyWords(in), in)
	}
}

func TestCanonicalNumber(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"1200": "1200", "1e2": "100", "100.0": "100", "12.5": "12.5", "12345678901234567890": "12345678901234567890",
		"-3": "-3", "1.5e-8": "1.5e-08", "0.000000015": "1.5e-08",
		// An integer is its digits however it is written, as PostgreSQL's
		// jsonb gives it back (1e15 comes back as 1000000000000000).
		"1e15": "1000000000000000", "1000000000000000": "1000000000000000", "1.5e300": "15" + strings.Repeat("0", 299),
		"1.5e301": "15" + strings.Repeat("0", 300),
	} {
		require.Equal(t, want, CanonicalNumber(json.Number(in)), in)
	}
}

func TestAgentContextText(t *testing.T) {
	t.Parallel()
	got := AgentContextText(map[string]any{"assets": []any{map[string]any{}}, "HTTPServers": []any{}, "n": json.Number("12345678901234567890")})
	require.Equal(t, "No http servers loaded.\nassets:\n  - (none)\nn: 12345678901234567890\n", got)
}

func TestPlanAndTitleShowOnlyWhatIsGiven(t *testing.T) {
	t.Parallel()
	d := &Doc{Project: "p", TargetRole: "r", Plan: &Plan{}, Sections: map[string][]Entry{}}
	require.NotContains(t, Text(Render(ctxtype.Markdown, d)), "Plan")
	d.Plan = &Plan{PlanHash: "h"}
	require.Contains(t, Text(Render(ctxtype.Markdown, d)), "## 3. Plan Pointer\nPlan Hash: `h`\n")
	d.Plan = &Plan{TotalSteps: 3, ActiveStepIndex: 1}
	require.Contains(t, Text(Render(ctxtype.Markdown, d)), "## 3. Plan Pointer\nStep 2 of 3\n")
	require.Equal(t, "- c\n", MarkdownItemBlock("   ", "c"))
	require.Equal(t, "- source: s; priority: 0; title: untitled\nc\n", blocksEntry(Entry{Source: "s", Title: " ", Content: "c"}))
}

func TestSnippetFences(t *testing.T) {
	t.Parallel()
	got := predecessorText(Predecessor{ID: "hnd_1", SourceRole: "a", TargetRole: "b", Status: "pending",
		Artifacts: []ctxtype.Artifact{{Name: "n", Snippet: "Run:\n```sh\nmake test\n```\nDone"}}})
	require.Contains(t, got, "    ````\n    Run:\n    ```sh\n    make test\n    ```\n    Done\n    ````\n")
	require.Equal(t, "```", fenceFor("plain"))
}
