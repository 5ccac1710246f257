package outcome

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/store"
)

// TestUsed: an answer uses the entries whose spans its matches overlap,
// in record order, with the best match; a short sentence alone is not
// looked for; excluded records and records without a span never count.
func TestUsed(t *testing.T) {
	t.Parallel()
	rendered := "## Rules\nRefunds over 500 EUR need a manager.\nShipping is free over 50 EUR for every order we send.\n"
	rec := func(key string, start, end int, decision string) ctxtype.Record {
		return ctxtype.Record{SubjectKind: ctxtype.SubjectItem, SubjectProject: "acme", SubjectKey: key, SubjectVersion: 2,
			Decision: decision, Span: &ctxtype.Span{Start: start, End: end}}
	}
	records := []ctxtype.Record{
		{SubjectKind: ctxtype.SubjectRequest, SubjectKey: "task", Decision: ctxtype.Included},
		rec("refund", 9, 46, ctxtype.Included),
		rec("shipping", 46, len(rendered), ctxtype.Included),
		rec("gone", 0, 9, ctxtype.Excluded),
	}
	for _, tc := range []struct {
		name, answer string
		want         []store.OutcomeUse
	}{
		{"a sentence quoted among own words", "Let me check. Refunds over 500 EUR need a manager. So I asked one.",
			[]store.OutcomeUse{{Subject: "item", Project: "acme", Key: "refund", Version: 2, Similarity: 1, Match: "exact"}}},
		{"a paraphrase sharing a passage", "Good news: shipping is free over 50 EUR for every order we send to you and your family in the country today.",
			[]store.OutcomeUse{{Subject: "item", Project: "acme", Key: "shipping", Version: 2, Similarity: 0.5, Match: "passage"}}}, // 11 of its 22 words
		{"nothing shared", "I do not know, sorry about that, please ask again later on.", []store.OutcomeUse{}},
		{"a short sentence alone", "Yes. Rules.", []store.OutcomeUse{}},
	} {
		require.Equal(t, tc.want, Used(rendered, tc.answer, records), tc.name)
	}
}

func TestSentences(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{"one two three four five.", "six seven eight nine ten eleven"},
		sentences("Hi. one two three four five. Ok!\nsix seven eight nine ten eleven"))
	require.Equal(t, []string{"version 1.2 is the one we ship"}, sentences("version 1.2 is the one we ship"))
}
