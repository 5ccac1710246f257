package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/pgtest"
)

// TestSnapshotTermsComputeEachVectorOnce: a replay weighs the relevance
// items current in the packet's snapshot; a version that is no longer
// current has its search vector computed again. contextd_term_weights is
// inlined, and it names its argument twice for each lexeme, so the vector
// must be a column before it (else it was computed once per lexeme: 18 ms
// for an item of ~1 KB). The plan of SnapshotTerms, as a replay of a
// packet whose relevance items all changed since sends it, computes
// to_tsvector in one place; and the replay is the packet.
func TestSnapshotTermsComputeEachVectorOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewURL(t)
	rec := &recorder{}
	a, admin := withAcme(t, recordingStore(t, url, rec))
	batch := func(round int) []item.Input {
		var out []item.Input
		for i := range 40 {
			out = append(out, item.Input{Key: fmt.Sprintf("r%02d", i), Trigger: &ctxtype.Trigger{Relevance: true},
				Content: fmt.Sprintf("refund %d of round %d: invoices ship within %d days", i, round, i%9)})
		}
		return out
	}
	_, err := a.Items.Batch(ctx, admin, "acme", batch(1))
	require.NoError(t, err)
	p, err := a.Packets.Assemble(ctx, admin, "acme", &ctxtype.Request{TargetRole: "implementer", Query: "refund invoices"})
	require.NoError(t, err)
	_, err = a.Items.Batch(ctx, admin, "acme", batch(2))
	require.NoError(t, err)

	rec.start()
	res, err := a.Packets.Replay(ctx, admin, "acme", p.ID)
	require.NoError(t, err)
	stmts := rec.stop()
	require.True(t, res.Identical, "the replay is the packet")
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	found := false
	for _, s := range stmts {
		if s.name != "SnapshotTerms" {
			continue
		}
		found = true
		var raw string
		require.NoError(t, conn.QueryRow(ctx, "EXPLAIN (VERBOSE, FORMAT JSON) "+s.sql,
			append([]any{pgx.QueryExecModeSimpleProtocol}, s.args...)...).Scan(&raw))
		var doc []struct{ Plan vecNode }
		require.NoError(t, json.Unmarshal([]byte(raw), &doc))
		require.True(t, doc[0].Plan.computesVector(), "no node of the plan computes the vector as a column of its own "+
			"(EXPLAIN VERBOSE names a column by the expression that makes it, so the text cannot tell):\n%s", raw)
	}
	require.True(t, found, "the replay sent no SnapshotTerms")
}

// vecNode is a node of an EXPLAIN (VERBOSE, FORMAT JSON) plan.
type vecNode struct {
	NodeType string    `json:"Node Type"`
	Output   []string  `json:"Output"`
	Plans    []vecNode `json:"Plans"`
}

// computesVector reports whether a node that makes a subquery's row (a
// Result or a Subquery Scan) outputs a search vector it computes.
func (n vecNode) computesVector() bool {
	if n.NodeType == "Result" || n.NodeType == "Subquery Scan" {
		for _, o := range n.Output {
			if strings.Contains(o, "to_tsvector(") {
				return true
			}
		}
	}
	for _, c := range n.Plans {
		if c.computesVector() {
			return true
		}
	}
	return false
}

// TestSnapshotTermsAreTheVectorsWeights: the weights a replay ranks by,
// of versions still current (from item_terms) and of versions replaced
// since (computed from their text), are those contextd_term_weights gives
// the version's own search vector, for the query's lexemes and no other.
func TestSnapshotTermsAreTheVectorsWeights(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	owner, _, st := asServerLogin(t)
	a, admin := withAcme(t, st)
	words := []string{"refund", "invoices", "ship", "orders", "manager", "days", "policy", "late"}
	batch := func(round int) []item.Input {
		var out []item.Input
		for i := range 30 {
			var text []string
			for j := range 3 + i%5 {
				text = append(text, words[(i*3+j*(round+1))%len(words)])
			}
			out = append(out, item.Input{Key: fmt.Sprintf("r%02d", i), Trigger: &ctxtype.Trigger{Relevance: true},
				Content: fmt.Sprintf("%s, item %d round %d.", strings.Join(text, " "), i, round)})
		}
		return out
	}
	_, err := a.Items.Batch(ctx, admin, "acme", batch(1))
	require.NoError(t, err)
	lexemes, err := st.QueryLexemes(ctx, "refund invoices ship manager", 16)
	require.NoError(t, err)
	require.Len(t, lexemes, 4)
	var snapshot string
	require.NoError(t, owner.QueryRow(ctx, "SELECT pg_current_snapshot()::text").Scan(&snapshot))
	want := map[[2]string]map[string]int{}
	rows, err := owner.Query(ctx, `SELECT v.key, w.lexeme, w.weight FROM items i
		JOIN item_versions v ON v.project = i.project AND v.key = i.key AND v.version = i.current_version
		CROSS JOIN LATERAL (SELECT contextd_search_vector(v.title, v.summary, v.content) AS vec OFFSET 0) sv
		CROSS JOIN LATERAL contextd_term_weights(sv.vec) w
		WHERE i.project = 'acme' AND w.lexeme = ANY($1)`, lexemes)
	require.NoError(t, err)
	for rows.Next() {
		var key, lexeme string
		var weight int
		require.NoError(t, rows.Scan(&key, &lexeme, &weight))
		k := [2]string{"acme", key}
		if want[k] == nil {
			want[k] = map[string]int{}
		}
		want[k][lexeme] = weight
	}
	require.NoError(t, rows.Err())
	require.Greater(t, len(want), 20, "most items have one of the lexemes")

	got, err := st.SnapshotTerms(ctx, []string{"acme", ctxtype.SharedProject}, snapshot, lexemes)
	require.NoError(t, err)
	require.Equal(t, want, got, "every version current")
	// New versions of every other item: theirs in the snapshot are old.
	_, err = a.Items.Batch(ctx, admin, "acme", everyOther(batch(2)))
	require.NoError(t, err)
	got, err = st.SnapshotTerms(ctx, []string{"acme", ctxtype.SharedProject}, snapshot, lexemes)
	require.NoError(t, err)
	require.Equal(t, want, got, "half of them replaced since")
}

func everyOther(in []item.Input) []item.Input {
	var out []item.Input
	for i := 0; i < len(in); i += 2 {
		out = append(out, in[i])
	}
	return out
}
