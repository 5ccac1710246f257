package item_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/pgtest"
	"github.com/contextd/contextd/internal/project"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// BenchmarkBatchIngest writes batches of 10,000 items of about 500 bytes,
// each batch to fresh keys, through the service (validation, exact token
// counts, COPY), and reports items/s.
func BenchmarkBatchIngest(b *testing.B) {
	st := pgtest.NewStore(b)
	ctx := context.Background()
	projects := project.NewService(st)
	items := item.NewService(st, projects)
	admin := &auth.Agent{ID: "agt_bench", Role: "admin", Permission: auth.Admin, Projects: []string{"*"}}
	_, _, err := projects.Put(ctx, admin, "bench", "")
	require.NoError(b, err)
	const n = 10000
	sentence := "Refunds over 500 euros need a manager's approval before the ledger closes. "
	content := strings.Repeat(sentence, 500/len(sentence)+1)[:500]
	round := 0
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		ins := make([]item.Input, n)
		for i := range ins {
			ins[i] = item.Input{Key: fmt.Sprintf("r%d.item-%05d", round, i), Content: fmt.Sprintf("%d %s", i, content)}
		}
		round++
		b.StartTimer()
		res, err := items.Batch(ctx, admin, "bench", ins)
		if err != nil {
			b.Fatal(err)
		}
		if res.Created != n {
			b.Fatalf("created %d, want %d", res.Created, n)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "items/s")
}
