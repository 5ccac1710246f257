package store_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/store"
)

// Packet assembly plans its statements by their shape, not by the
// planner's statistics: right after a bulk import (no ANALYZE yet, which
// is every new deployment's first minute with autovacuum off or behind) a
// packet's statements run the plans they run once the tables are
// analyzed, under custom and generic plans alike. The statements are the
// ones a real packet sends, with its arguments, recorded as pgx sends
// them; each is planned (EXPLAIN EXECUTE of it prepared) before and after
// ANALYZE, and its plan's nodes, relations and indexes must not change.
// No plan reads items, item_versions or item_terms whole, and the GIN
// index a plan reads keeps no pending list (a bulk import's list is read
// whole by every scan until a VACUUM merges it).
func TestAssemblyPlansNeedNoStatistics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.NewURL(t)
	rec := &recorder{}
	st := recordingStore(t, url, rec)
	a := app.New(st)
	admin, _, err := a.Agents.Bootstrap(ctx)
	require.NoError(t, err)
	_, _, err = a.Projects.Put(ctx, admin, "acme", "")
	require.NoError(t, err)
	for _, layer := range []string{"acme", ctxtype.SharedProject} {
		n := 3000
		if layer == ctxtype.SharedProject {
			n = 400
		}
		for lo := 0; lo < n; lo += item.MaxBatch {
			_, err = a.Items.Batch(ctx, admin, layer, planCorpus(layer, lo, min(lo+item.MaxBatch, n)))
			require.NoError(t, err)
		}
	}
	rec.start()
	_, err = a.Packets.Assemble(ctx, admin, "acme", planRequest())
	require.NoError(t, err)
	stmts := rec.stop()
	names := map[string]bool{}
	for _, s := range stmts {
		names[s.name] = true
	}
	for _, want := range []string{"BoundedSmall", "BoundedRelevanceLists", "BoundedByKeys", "BoundedAlways", "BoundedTool",
		"BoundedKeywordRefs", "BoundedStateGroups", "BoundedTexts", "BoundedCountRestricted"} {
		require.True(t, names[want], "the packet sent no %s (sent %v): the request no longer exercises it", want, names)
	}

	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	before := explainAll(ctx, t, conn, stmts)
	_, err = conn.Exec(ctx, "ANALYZE")
	require.NoError(t, err)
	after := explainAll(ctx, t, conn, stmts)
	var changed, whole []string
	for k, b := range before {
		if b.shape != after[k].shape {
			t.Logf("%s: without statistics:\n%swith:\n%s", k, b.shape, after[k].shape)
			changed = append(changed, k)
		}
		for _, p := range []plan{b, after[k]} {
			for _, s := range p.scans {
				if s.node == "Seq Scan" {
					whole = append(whole, k+": "+s.relation)
				}
			}
		}
	}
	require.Empty(t, changed, "plans that change with statistics")
	require.Empty(t, whole, "plans that read a table whole")
	for _, idx := range ginIndexes(ctx, t, conn, before) {
		var opts []string
		require.NoError(t, conn.QueryRow(ctx, "SELECT coalesce(reloptions, '{}') FROM pg_class WHERE relname = $1", idx).Scan(&opts))
		require.Contains(t, opts, "fastupdate=off", "packet assembly reads GIN index %s, which keeps a pending list", idx)
	}
}

// planCorpus is items lo..hi-1 of a layer: a fifth always-on (some
// restricted to a role or a window, some in contradiction groups by state
// key), the rest keyword, tool and relevance items in turn.
func planCorpus(layer string, lo, hi int) []item.Input {
	var out []item.Input
	for i := lo; i < hi; i++ {
		in := item.Input{Key: fmt.Sprintf("k%05d", i),
			Content: fmt.Sprintf("refund policy %d of %s: orders ship within %d days, invoices net %d", i, layer, i%7, i%30)}
		switch {
		case i%5 == 0:
			in.Trigger = &ctxtype.Trigger{Always: true}
			switch {
			case i%50 == 0:
				in.StateKey = ptr(fmt.Sprintf("state-%d", i/100))
			case i%35 == 0:
				in.Roles = &ctxtype.Roles{VisibleTo: []string{"reviewer"}}
			case i%45 == 0:
				in.ValidUntil = ptr(time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339))
			}
		case i%3 == 0:
			in.Trigger = &ctxtype.Trigger{Keywords: []string{fmt.Sprintf("word%d", i%97)}}
		case i%3 == 1:
			tool := fmt.Sprintf("tool_%d", i%20)
			in.Trigger = &ctxtype.Trigger{Tool: &tool}
		default:
			in.Trigger = &ctxtype.Trigger{Relevance: true}
		}
		out = append(out, in)
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// planRequest is a packet that reads every lane: pins in both layers, a
// relevance query, a person's words for the keyword lane and a tool result.
func planRequest() *ctxtype.Request {
	return &ctxtype.Request{
		TargetRole:  "implementer",
		TokenBudget: 4000, // less than the candidates: the rest are counted
		Pins:        []string{"k00007", "k00011", "k00301"},
		Query:       "refund invoices ship orders",
		History:     []ctxtype.Message{{Role: "user", Author: "person", Content: "the refund for word3 and word17 please"}},
		ToolResults: []ctxtype.ToolResult{{Tool: "tool_4", Status: "ok"}},
	}
}

// recorder keeps the assembly's statements, with their arguments, between
// start and stop (pgx's QueryTracer and BatchTracer).
type recorder struct {
	mu    sync.Mutex
	on    bool
	stmts []recorded
}

type recorded struct {
	name, sql string
	args      []any
}

func (r *recorder) start() { r.mu.Lock(); r.on = true; r.mu.Unlock() }

func (r *recorder) stop() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
	return r.stmts
}

// add keeps a statement of the assembly's reads (the bounded statements
// and the query's lexemes) or a replay's weights (SnapshotTerms), named
// by its sqlc name.
func (r *recorder) add(sql string, args []any) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(sql), "-- name: ")
	if !ok {
		return
	}
	name, _, _ := strings.Cut(rest, " ")
	if !strings.HasPrefix(name, "Bounded") && name != "QueryLexemes" && name != "SnapshotTerms" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on {
		r.stmts = append(r.stmts, recorded{name: name, sql: sql, args: append([]any(nil), args...)})
	}
}

func (r *recorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(d.SQL, d.Args)
	return ctx
}

func (r *recorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (r *recorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	if d.Batch != nil {
		for _, q := range d.Batch.QueuedQueries {
			r.add(q.SQL, q.Arguments)
		}
	}
	return ctx
}

func (r *recorder) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *recorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// recordingStore is a store over url whose connections tell rec what
// they send.
func recordingStore(t *testing.T, url string, rec *recorder) *store.Store {
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.ConnConfig.Tracer = rec
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return store.New(pool, pgtest.AcquireTimeout)
}

// plan is a statement's plan: its shape (one line per node: type,
// relation, index) and its scans of relations.
type plan struct {
	shape string
	scans []scan
}

type scan struct{ node, relation, index string }

// explainAll plans each recorded statement (its first three sendings)
// with generic and custom plans, by statement name, sending and mode.
func explainAll(ctx context.Context, t *testing.T, conn *pgx.Conn, stmts []recorded) map[string]plan {
	out := map[string]plan{}
	seen := map[string]int{}
	for _, s := range stmts {
		if seen[s.name]++; seen[s.name] > 3 {
			continue
		}
		for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
			out[fmt.Sprintf("%s #%d %s", s.name, seen[s.name], mode)] = explain(ctx, t, conn, s, mode)
		}
	}
	return out
}

// explain prepares s and plans its execution with its arguments, which
// pgx writes into the EXECUTE as literals.
func explain(ctx context.Context, t *testing.T, conn *pgx.Conn, s recorded, mode string) plan {
	require.NoError(t, conn.DeallocateAll(ctx))
	_, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode, pgx.QueryExecModeSimpleProtocol)
	require.NoError(t, err)
	_, err = conn.Prepare(ctx, "assembly_stmt", s.sql)
	require.NoError(t, err, s.name)
	marks := make([]string, len(s.args))
	for i := range marks {
		marks[i] = fmt.Sprintf("$%d", i+1)
	}
	var raw string
	err = conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE assembly_stmt("+strings.Join(marks, ", ")+")",
		append([]any{pgx.QueryExecModeSimpleProtocol}, s.args...)...).Scan(&raw)
	require.NoError(t, err, s.name)
	var doc []struct{ Plan node }
	require.NoError(t, json.Unmarshal([]byte(raw), &doc))
	var p plan
	var b strings.Builder
	walk(doc[0].Plan, &b, &p)
	p.shape = b.String()
	return p
}

type node struct {
	NodeType     string `json:"Node Type"`
	RelationName string `json:"Relation Name"`
	IndexName    string `json:"Index Name"`
	Plans        []node `json:"Plans"`
}

// walk adds n's accesses to p: each scan of a table that grows with a
// project (items, item_versions, item_terms; the counters hold a row per
// project or tool, which a scan of any kind reads alike), named by the
// table and the index it probes. How an index's entries are fetched
// (one by one, by bitmap, from the index alone) and what sits between the
// scans (sorts, memoization, limits) may follow the statistics: the rows
// read do not. The two indexes of item_versions that lead with (project,
// key) are one probe: without statistics PostgreSQL may take either for a
// version by key (they cost the same to it), and both read one key's
// versions.
func walk(n node, b *strings.Builder, p *plan) {
	rel, idx := n.RelationName, n.IndexName
	if n.NodeType == "Bitmap Heap Scan" && len(n.Plans) > 0 && n.Plans[0].NodeType == "Bitmap Index Scan" {
		idx, n.Plans = n.Plans[0].IndexName, n.Plans[1:] // the rest are subplans of its filter
	}
	shown := idx
	if rel == "item_versions" && (idx == "item_versions_pkey" || idx == "item_versions_created_idx") {
		shown = "item_versions by (project, key)"
	}
	if rel == "items" || rel == "item_versions" || rel == "item_terms" || (rel == "" && idx != "") {
		fmt.Fprintf(b, "%s via %s\n", rel, cmp.Or(shown, n.NodeType))
		p.scans = append(p.scans, scan{n.NodeType, rel, idx})
	}
	for _, c := range n.Plans {
		walk(c, b, p)
	}
}

// ginIndexes is the GIN indexes the plans read.
func ginIndexes(ctx context.Context, t *testing.T, conn *pgx.Conn, plans map[string]plan) []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range plans {
		for _, s := range p.scans {
			if s.index == "" || seen[s.index] {
				continue
			}
			seen[s.index] = true
			var am string
			require.NoError(t, conn.QueryRow(ctx, `SELECT a.amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.relname = $1`, s.index).Scan(&am))
			if am == "gin" {
				out = append(out, s.index)
			}
		}
	}
	return out
}
