package server_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/footprint"
)

// The trace as agentfootprint declares it, written from its TypeScript and
// not from package footprint: InjectionRecord (src/recorders/core/types.ts)
// with every member, optional ones omitempty, in the interface's order;
// skipped as InjectionEvaluation.skipped (src/lib/injection-engine/types.ts).
type afBudgetSpent struct {
	Tokens        int     `json:"tokens"`
	FractionOfCap float64 `json:"fractionOfCap"`
}

type afInjectionRecord struct {
	ContentSummary string         `json:"contentSummary"`
	RawContent     *string        `json:"rawContent,omitempty"`
	ContentHash    string         `json:"contentHash"`
	Slot           string         `json:"slot"`
	Source         string         `json:"source"`
	SourceID       *string        `json:"sourceId,omitempty"`
	UpstreamRef    *string        `json:"upstreamRef,omitempty"`
	Reason         string         `json:"reason"`
	AsRole         *string        `json:"asRole,omitempty"`
	AsRecency      *string        `json:"asRecency,omitempty"`
	Position       *int           `json:"position,omitempty"`
	SectionTag     *string        `json:"sectionTag,omitempty"`
	RetrievalScore *float64       `json:"retrievalScore,omitempty"`
	RankPosition   *int           `json:"rankPosition,omitempty"`
	Threshold      *float64       `json:"threshold,omitempty"`
	BudgetSpent    *afBudgetSpent `json:"budgetSpent,omitempty"`
	ExpiresAfter   *string        `json:"expiresAfter,omitempty"`
}

type afSkipped struct {
	ID     string  `json:"id"`
	Reason string  `json:"reason"`
	Error  *string `json:"error,omitempty"`
}

type afEvicted struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

type afTrace struct {
	Data    []afInjectionRecord `json:"data"`
	Skipped []afSkipped         `json:"skipped"`
	Evicted []afEvicted         `json:"evicted"`
}

// decodeTrace decodes a trace strictly (no member agentfootprint lacks) and
// checks it round-trips: re-encoded, the same bytes.
func decodeTrace(t *testing.T, r resp) afTrace {
	t.Helper()
	require.Equal(t, 200, r.status, r.text)
	dec := json.NewDecoder(strings.NewReader(r.text))
	dec.DisallowUnknownFields()
	var tr afTrace
	require.NoError(t, dec.Decode(&tr), r.text)
	again, err := json.Marshal(tr)
	require.NoError(t, err)
	require.Equal(t, strings.TrimSuffix(r.text, "\n"), string(again), "an agentfootprint-style trace round-trips")
	return tr
}

// footprintWorld: included items of every section and source, a budget
// eviction, a contradiction, an override, a keyword trigger that does not
// fire, an unresolved template and a hidden item.
func footprintWorld(t *testing.T) (*env, map[string]any) {
	e := setup(t)
	e.project("fp")
	kw := func(w string) *api.Trigger { return &api.Trigger{Keywords: &[]string{w}} }
	e.batch("fp", []api.BatchItem{
		{Key: "always.rule", Content: "Always cite the ticket.", Title: ptr("Citations")},
		{Key: "refund.rules", Content: "Refunds over 500 EUR need a manager.", Trigger: kw("refund"), Priority: ptr(int32(3))},
		{Key: "deploy.notes", Content: "Deploys freeze on Fridays.", Trigger: kw("deploy")},
		{Key: "long.note", Content: strings.Repeat("A long note about ledgers. ", 6)},
		{Key: "greet", Content: "Hello {{customer}}.", Template: ptr(true)},
		{Key: "hole", Content: "Your order {{order_id}} shipped.", Template: ptr(true)},
		{Key: "window.policy", Content: "Refund window is 30 days.", StateKey: ptr("refund.window"), Authority: ptr("policy"), Source: ptr("human")},
		{Key: "window.old", Content: "Refund window is 14 days.", StateKey: ptr("refund.window"), Authority: ptr("hypothesis")},
		{Key: "huge", Content: strings.Repeat("word ", 3000), Priority: ptr(int32(1000))},
		{Key: "critic.rubric", Content: "Reject patches without tests.", Roles: &api.Roles{VisibleTo: &[]string{"critic"}}},
		{Key: "search.ledger", Content: "The ledger reconciles nightly at 02:00.", Trigger: &api.Trigger{Relevance: ptr(true)}},
		{Key: "tool.transcribe", Content: "Transcribe a video.", Title: ptr("transcribe_video"), Slot: ptr("tools"), Kind: ptr("tool")},
		{Key: "msg.note", Content: "Remember the customer is waiting.", Slot: ptr("messages")},
		{Key: "skill.triage", Content: "Triage: read the ticket, then the logs.", Kind: ptr("skill")},
		{Key: "tone", Content: "Be friendly."},
	})
	e.batch("_shared", []api.BatchItem{
		{Key: "tone", Content: "Be formal."},
		{Key: "house.style", Content: "Use British spelling."},
	})
	req := map[string]any{
		"target_role":         "implementer",
		"token_budget":        1500,
		"task":                map[string]any{"task_id": "T-1", "step_id": "implement", "step_attempt": 1, "objective": "Fix the refund bug."},
		"acceptance_criteria": []any{map[string]any{"id": "AC1", "description": "Tests pass", "verification_kind": "gate", "required": true}},
		"history": []any{
			map[string]any{"role": "user", "author": "person", "content": "The refund for order 7 failed."},
			map[string]any{"role": "user", "author": "library", "content": "Summary: talked about the deploy."},
		},
		"query":     "when does the ledger reconcile",
		"variables": map[string]any{"customer": "Ada"},
	}
	return e, req
}

// recordID is the trace's name for a contextd record, as docs/formats.md says.
func recordID(rec map[string]any) string {
	switch rec["subject"] {
	case "request":
		return "request/" + rec["key"].(string)
	case "handoff":
		return "handoff/" + rec["key"].(string)
	}
	if rec["project"] == "_shared" {
		return "_shared/" + rec["key"].(string)
	}
	return rec["key"].(string)
}

func TestFootprintRecordsTrace(t *testing.T) {
	t.Parallel()
	e, req := footprintWorld(t)
	impl := e.agent("implementer", auth.ReadOnly, "fp")
	p := e.do("POST", "/v1/projects/fp/packets", impl, req)
	require.Equal(t, 201, p.status, p.text)
	id := p.json["packet_id"].(string)
	rendered := p.json["rendered"].(string)
	allocated := p.json["budget"].(map[string]any)["allocated"].(float64)
	require.Equal(t, 1500.0, allocated)

	base := "/v1/projects/fp/packets/" + id + "/records"
	recs := e.do("GET", base, impl, nil).list()
	answer := e.do("GET", base+"?format=agentfootprint", impl, nil)
	tr := decodeTrace(t, answer)
	// A trigger that did not fire has no record, and a hidden item's record
	// is the admin's alone: neither is anywhere in the trace.
	for _, absent := range []string{"deploy.notes", "critic.rubric"} {
		require.NotContains(t, answer.text, absent)
	}

	// Every included record, in order, with its figures and its text's hash.
	byID := map[string]afInjectionRecord{}
	included := 0
	for _, rec := range recs {
		if rec["decision"] != "included" {
			continue
		}
		require.Less(t, included, len(tr.Data))
		got := tr.Data[included]
		included++
		rid := recordID(rec)
		require.Equal(t, rid, *got.SourceID)
		byID[rid] = got
		span := rec["span"].(map[string]any)
		text := rendered[int(span["start"].(float64)):int(span["end"].(float64))]
		require.Equal(t, footprint.FNV1a(text), got.ContentHash, rid)
		require.Equal(t, footprint.Truncate(text, 80), got.ContentSummary, rid)
		require.Equal(t, rec["section"], *got.SectionTag, rid)
		require.Equal(t, int(rec["position"].(float64)), *got.Position, rid)
		require.Equal(t, rec["rule"], got.Reason, rid)
		tokens := rec["tokens"].(float64)
		require.Equal(t, afBudgetSpent{Tokens: int(tokens), FractionOfCap: tokens / allocated}, *got.BudgetSpent, rid)
		if rank := rec["rank"].(float64); rank > 0 {
			require.Equal(t, int(rank), *got.RankPosition, rid)
		} else {
			require.Nil(t, got.RankPosition, rid)
		}
	}
	require.Len(t, tr.Data, included)

	checkFootprintEntries(t, byID)

	// Exclusions: the template and the budget, contradiction and override.
	require.Len(t, tr.Skipped, 1)
	require.Equal(t, "hole", tr.Skipped[0].ID)
	require.Equal(t, "unknown-fact", tr.Skipped[0].Reason)
	require.Contains(t, *tr.Skipped[0].Error, "order_id")
	require.ElementsMatch(t, []afEvicted{{"huge", "budget"}, {"window.old", "contradicted"}, {"_shared/tone", "overridden"}}, tr.Evicted)

	// The admin sees the hidden item, skipped, and nothing else changes.
	adm := decodeTrace(t, e.do("GET", base+"?format=agentfootprint", e.admin, nil))
	require.Equal(t, tr.Data, adm.Data)
	require.Equal(t, tr.Evicted, adm.Evicted)
	require.ElementsMatch(t, []string{"hole/unknown-fact", "critic.rubric/hidden"},
		[]string{adm.Skipped[0].ID + "/" + adm.Skipped[0].Reason, adm.Skipped[1].ID + "/" + adm.Skipped[1].Reason})
	require.Len(t, adm.Skipped, 2)

	// decision filters the trace as it does the records.
	inc := decodeTrace(t, e.do("GET", base+"?format=agentfootprint&decision=included", impl, nil))
	require.Equal(t, tr.Data, inc.Data)
	require.Empty(t, inc.Skipped)
	require.Empty(t, inc.Evicted)
	exc := decodeTrace(t, e.do("GET", base+"?format=agentfootprint&decision=excluded", impl, nil))
	require.Empty(t, exc.Data)
	require.Equal(t, tr.Evicted, exc.Evicted)

	// The default is unchanged, and an unknown format is refused.
	require.Equal(t, e.do("GET", base, impl, nil).text, e.do("GET", base+"?format=contextd", impl, nil).text)
	bad := e.do("GET", base+"?format=bogus", impl, nil)
	require.Equal(t, 422, bad.status, bad.text)
	require.Contains(t, bad.text, "agentfootprint")
}

// checkFootprintEntries: the slot, source and evidence of particular entries.
func checkFootprintEntries(t *testing.T, byID map[string]afInjectionRecord) {
	t.Helper()
	type want struct{ slot, source, section string }
	for rid, w := range map[string]want{
		"request/objective":   {"system-prompt", "fact", "Objective"},
		"refund.rules":        {"system-prompt", "fact", "Project Knowledge"},
		"tool.transcribe":     {"tools", "registry", "Tools"},
		"msg.note":            {"messages", "fact", "Messages"},
		"skill.triage":        {"system-prompt", "skill", "Active Skills"},
		"search.ledger":       {"system-prompt", "rag", "Project Knowledge"},
		"_shared/house.style": {"system-prompt", "fact", "Shared Defaults"},
		"window.policy":       {"system-prompt", "fact", "Project Knowledge"},
		"tone":                {"system-prompt", "fact", "Project Knowledge"},
		"greet":               {"system-prompt", "fact", "Project Knowledge"},
	} {
		got, ok := byID[rid]
		require.True(t, ok, "%s is in the trace", rid)
		require.Equal(t, w, want{got.Slot, got.Source, *got.SectionTag}, rid)
	}
	// The hash is agentfootprint's own (node's fnv1a of this text).
	require.Equal(t, "- Refunds over 500 EUR need a manager.\n", byID["refund.rules"].ContentSummary)
	require.Equal(t, "bcb40f6c", byID["refund.rules"].ContentHash)
	require.Equal(t, `keyword:"refund"@history[0]`, byID["refund.rules"].Reason)
	long := byID["long.note"].ContentSummary
	require.True(t, strings.HasSuffix(long, "…") && len([]rune(long)) == 80, long)
	// A relevance score only where a relevance trigger ranked the item.
	ledger := byID["search.ledger"]
	require.NotNil(t, ledger.RetrievalScore)
	require.Greater(t, *ledger.RetrievalScore, 0.0)
	require.Equal(t, "relevance:", ledger.Reason[:len("relevance:")])
	for rid, got := range byID {
		if rid != "search.ledger" {
			require.Nil(t, got.RetrievalScore, rid)
		}
	}
	require.Nil(t, byID["request/objective"].RankPosition)
	require.NotNil(t, byID["refund.rules"].RankPosition)
	require.False(t, bytes.Contains([]byte(byID["greet"].ContentSummary), []byte("{{")), "the template's resolved text")
}
