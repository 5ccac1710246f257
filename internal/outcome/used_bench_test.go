package outcome

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/contextd/contextd/internal/ctxtype"
)

// usedCase is a packet like the default bench corpus's (~45 KB of
// markdown, ~80 included items of 200 to 2,000 bytes of words of a
// 3,000-word vocabulary, a few excluded) and a 2 KB answer that quotes its
// sentences among sentences of its own, as contextd bench --only outcomes
// writes them.
func usedCase(seed uint64) (rendered, answer string, records []ctxtype.Record) {
	rng := rand.New(rand.NewPCG(seed, 36))
	vocab := make([]string, 3000)
	for i := range vocab {
		vocab[i] = fmt.Sprintf("%c%c%c%d", 'a'+rng.IntN(26), 'a'+rng.IntN(26), 'a'+rng.IntN(26), i%7)
	}
	text := func(n int) string {
		var b strings.Builder
		for b.Len() < n {
			for w := range 5 + rng.IntN(12) {
				word := vocab[rng.IntN(len(vocab))]
				if w == 0 {
					word = strings.ToUpper(word[:1]) + word[1:]
				}
				b.WriteString(word)
				b.WriteByte(' ')
			}
			b.WriteString("is so. ")
		}
		return b.String()
	}
	var b strings.Builder
	b.WriteString("# Context Packet\n\n## Task\n" + text(300) + "\n\n## Project Knowledge\n")
	var quotes []string
	for i := 0; b.Len() < 45000; i++ {
		content := text(200 + rng.IntN(1800))
		b.WriteString("- **" + vocab[i] + "** ")
		start := b.Len()
		b.WriteString(content)
		records = append(records, ctxtype.Record{SubjectKind: ctxtype.SubjectItem, SubjectProject: "acme",
			SubjectKey: fmt.Sprintf("item-%d", i), SubjectVersion: 1, Decision: ctxtype.Included,
			Span: &ctxtype.Span{Start: start, End: b.Len()}})
		b.WriteString("\n")
		for _, s := range strings.SplitAfter(content, ". ") {
			if len(strings.Fields(s)) >= MinSentenceWords {
				quotes = append(quotes, strings.TrimSpace(s))
			}
		}
	}
	records = append(records, ctxtype.Record{SubjectKind: ctxtype.SubjectItem, SubjectProject: "acme", SubjectKey: "out",
		SubjectVersion: 1, Decision: ctxtype.Excluded})
	var a strings.Builder
	for a.Len() < 2048 {
		a.WriteString(quotes[rng.IntN(len(quotes))] + " " + text(80+rng.IntN(120)))
	}
	return b.String(), a.String()[:2048], records
}

// BenchmarkUsed is the attribution of a 2 KB answer to a default packet,
// the CPU of an outcome write: go test -run '^$' -bench Used
// -cpuprofile cpu.out ./internal/outcome/.
func BenchmarkUsed(b *testing.B) {
	rendered, answer, records := usedCase(1)
	if len(Used(rendered, answer, records)) == 0 {
		b.Fatal("the answer quotes the packet, yet used nothing")
	}
	for b.Loop() {
		Used(rendered, answer, records)
	}
}
