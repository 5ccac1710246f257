package packet_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/handoff"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/packet"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/project"
	"github.com/contextd/contextd/internal/store"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var vocab = func() []string {
	rng := rand.New(rand.NewPCG(7, 7))
	out := make([]string, 3000)
	for i := range out {
		b := make([]byte, 4+rng.IntN(6))
		for j := range b {
			b[j] = byte('a' + rng.IntN(26))
		}
		out[i] = string(b)
	}
	return out
}()

func sentence(rng *rand.Rand, bytes int) string {
	var b strings.Builder
	for b.Len() < bytes {
		b.WriteString(vocab[rng.IntN(len(vocab))])
		b.WriteByte(' ')
	}
	return b.String()[:bytes]
}

// seed writes n items of ~500 bytes: 20% always-on (the default trigger),
// the rest keyword, tool and relevance items in equal parts.
func seed(tb testing.TB, items *item.Service, admin *auth.Agent, proj string, n int) {
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	var batch []item.Input
	flush := func() {
		if len(batch) == 0 {
			return
		}
		_, err := items.Batch(context.Background(), admin, proj, batch)
		require.NoError(tb, err)
		batch = batch[:0]
	}
	for i := range n {
		in := item.Input{Key: fmt.Sprintf("item-%06d", i), Content: sentence(rng, 500)}
		switch {
		case i%5 == 0:
		case i%3 == 0:
			in.Trigger = &ctxtype.Trigger{Keywords: []string{vocab[rng.IntN(len(vocab))]}}
		case i%3 == 1:
			tool := fmt.Sprintf("tool_%d", rng.IntN(200))
			in.Trigger = &ctxtype.Trigger{Tool: &tool}
		default:
			in.Trigger = &ctxtype.Trigger{Relevance: true}
		}
		batch = append(batch, in)
		if len(batch) == item.MaxBatch {
			flush()
		}
	}
	flush()
}

// BenchmarkAssemble measures the server time of one packet (candidate
// selection, pipeline, storing the packet and its records) at 1k, 10k and
// 100k items per project, and reports the median.
func BenchmarkAssemble(b *testing.B) {
	sizes := []int{1000, 10000, 100000}
	if os.Getenv("CONTEXTD_BENCH_SIZES") == "small" {
		sizes = sizes[:2]
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("items=%d", n), func(b *testing.B) {
			pool := pgtest.New(b)
			st := store.New(pool, 0)
			ctx := context.Background()
			projects := project.NewService(st)
			items := item.NewService(st, projects)
			packets := packet.NewService(st, projects, handoff.NewService(st, projects, handoff.NewHub(st)))
			admin := &auth.Agent{ID: "agt_bench", Role: "admin", Permission: auth.Admin, Projects: []string{"*"}}
			_, _, err := projects.Put(ctx, admin, "bench", "")
			require.NoError(b, err)
			seed(b, items, admin, "bench", n)
			_, err = pool.Exec(ctx, "VACUUM ANALYZE")
			require.NoError(b, err)
			rng := rand.New(rand.NewPCG(3, 3))
			var took []time.Duration
			b.ResetTimer()
			for b.Loop() {
				req := &ctxtype.Request{
					TargetRole:  "implementer",
					TokenBudget: 16000,
					History:     []ctxtype.Message{{Role: "user", Author: "person", Content: sentence(rng, 200)}},
					ToolResults: []ctxtype.ToolResult{{Tool: fmt.Sprintf("tool_%d", rng.IntN(200)), Status: "ok"}},
					Query:       benchQuery(rng),
				}
				start := time.Now()
				p, err := packets.Assemble(ctx, admin, "bench", req)
				took = append(took, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				if p.Used > 16000 {
					b.Fatalf("budget exceeded: %d", p.Used)
				}
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms-median")
		})
	}
}

// benchQuery is the relevance query of each benchmark packet; set
// CONTEXTD_BENCH_NO_QUERY=1 to measure assembly without the relevance layer.
func benchQuery(rng *rand.Rand) string {
	q := sentence(rng, 40)
	if os.Getenv("CONTEXTD_BENCH_NO_QUERY") != "" {
		return ""
	}
	return q
}

// BenchmarkInjections measures the first page of the reverse lookup for an
// item used 200,000 times and one used 50 times in the same project: an
// index in the query's order makes them cost the same.
func BenchmarkInjections(b *testing.B) {
	pool := pgtest.New(b)
	st := store.New(pool, 0)
	ctx := context.Background()
	projects := project.NewService(st)
	items := item.NewService(st, projects)
	packets := packet.NewService(st, projects, handoff.NewService(st, projects, handoff.NewHub(st)))
	admin := &auth.Agent{ID: "agt_bench", Role: "admin", Permission: auth.Admin, Projects: []string{"*"}}
	_, _, err := projects.Put(ctx, admin, "bench", "")
	require.NoError(b, err)
	_, err = items.Batch(ctx, admin, "bench", []item.Input{{Key: "hot", Content: "used everywhere"}, {Key: "cold", Content: "used rarely"}})
	require.NoError(b, err)
	const hot, cold = 200000, 50
	for _, q := range []string{
		`INSERT INTO packets (project, id, created_at, created_by, target_role, request, format, tokenizer, rendered,
		     rendered_sha256, token_budget, tokens_used, gaps, provenance_summary, snapshot)
		 SELECT 'bench', 'ctxpkt_b' || g, now() - g * interval '1 second', 'agt_bench', 'support', '{}', 'markdown', 'o200k_base',
		     'x', decode(repeat('00', 32), 'hex'), 100, 1, '[]', '{}', '' FROM generate_series(1, $1::int) g`,
		`INSERT INTO packet_records (project, packet_id, ord, subject_kind, subject_project, subject_key, subject_version, decision, created_at)
		 SELECT 'bench', 'ctxpkt_b' || g, 0, 'item', 'bench', CASE WHEN g % ($1::int / 50) = 0 THEN 'cold' ELSE 'hot' END, 1, 'included',
		     now() - g * interval '1 second' FROM generate_series(1, $1::int) g`,
	} {
		_, err = pool.Exec(ctx, q, hot+cold)
		require.NoError(b, err)
	}
	_, err = pool.Exec(ctx, "VACUUM ANALYZE packets, packet_records")
	require.NoError(b, err)
	for _, key := range []string{"hot", "cold"} {
		b.Run("item="+key, func(b *testing.B) {
			for b.Loop() {
				inj, _, _, err := packets.Injections(ctx, admin, "bench", key, packet.InjectionParams{Limit: 50})
				if err != nil || len(inj) != 50 {
					b.Fatalf("%d injections, %v", len(inj), err)
				}
			}
		})
	}
}
