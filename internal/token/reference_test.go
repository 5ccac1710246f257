package token

import (
	"encoding/binary"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/dlclark/regexp2/v2"
	"github.com/stretchr/testify/require"
	"github.com/tiktoken-go/tokenizer"
)

// tiktoken-go is the reference: every count of this package must be its
// count. It is used by the tests only.

var refCodecs sync.Map // Tokenizer → tokenizer.Codec

func codec(t Tokenizer) (tokenizer.Codec, error) {
	if c, ok := refCodecs.Load(t); ok {
		return c.(tokenizer.Codec), nil
	}
	enc := map[Tokenizer]tokenizer.Encoding{O200kBase: tokenizer.O200kBase, Cl100kBase: tokenizer.Cl100kBase}[t]
	c, err := tokenizer.Get(enc)
	if err != nil {
		return nil, err
	}
	actual, _ := refCodecs.LoadOrStore(t, c)
	return actual.(tokenizer.Codec), nil
}

func refCount(t testing.TB, tok Tokenizer, s string) int {
	t.Helper()
	c, err := codec(tok)
	require.NoError(t, err)
	n, err := c.Count(s)
	require.NoError(t, err)
	return n
}

// The reference patterns, compiled with the engine tiktoken-go uses, to
// compare chunk by chunk: a count can hide two compensating errors.
var refPatterns = map[Tokenizer]*regexp2.Regexp{
	O200kBase:  regexp2.MustCompile(`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`, regexp2.None),
	Cl100kBase: regexp2.MustCompile(`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`, regexp2.None),
}

func refChunks(t testing.TB, tok Tokenizer, s string) []string {
	t.Helper()
	var out []string
	m, err := refPatterns[tok].FindStringMatch(s)
	for ; m != nil && err == nil; m, err = refPatterns[tok].FindNextMatch(m) {
		out = append(out, m.String())
	}
	require.NoError(t, err)
	return out
}

func ourChunks(tok Tokenizer, s string) []string {
	e := encodings[tokenizerIndex(tok)]
	var out []string
	for i := 0; i < len(s); {
		j := e.next(s, i)
		if j <= i {
			_, w := utf8.DecodeRuneInString(s[i:])
			i += w
			continue
		}
		out = append(out, s[i:j])
		i = j
	}
	return out
}

// checkExact compares chunks and counts with the reference under both
// tokenizers.
func checkExact(t testing.TB, s string) {
	t.Helper()
	valid := s
	if !utf8.ValidString(s) {
		valid = replaceInvalid(s)
	}
	for _, tok := range tokenizers {
		if want, got := refChunks(t, tok, valid), ourChunks(tok, valid); !slices.Equal(want, got) {
			for i := range min(len(want), len(got)) {
				if want[i] != got[i] {
					t.Fatalf("%s: chunk %d of %q: %q, tiktoken %q", tok, i, s, got[i], want[i])
				}
			}
			t.Fatalf("%s: %d chunks of %q, tiktoken %d", tok, len(got), s, len(want))
		}
		got, err := Count(tok, s)
		require.NoError(t, err)
		if want := refCount(t, tok, s); got != want {
			t.Fatalf("%s: Count(%q) = %d, tiktoken %d", tok, s, got, want)
		}
	}
}

// TestVocabularies pins the token ids of a known text, from tiktoken's own
// documentation, and checks the generated ranks give every token its
// tiktoken id, so a wrong or stale vocabulary cannot pass as a count.
func TestVocabularies(t *testing.T) {
	t.Parallel()
	for tok, want := range map[Tokenizer][]uint{
		Cl100kBase: {15339, 1917},
		O200kBase:  {24912, 2375},
	} {
		c, err := codec(tok)
		require.NoError(t, err)
		ids, _, err := c.Encode("hello world")
		require.NoError(t, err)
		require.Equal(t, want, ids, tok)
		e := encodings[tokenizerIndex(tok)]
		e.load()
		require.Equal(t, uint32(want[0]), e.ranks["hello"])
		require.Equal(t, uint32(want[1]), e.ranks[" world"])
		seen := 0
		for p := 0; p < len(e.data); seen++ {
			l, n := binary.Uvarint([]byte(e.data[p:min(p+10, len(e.data))]))
			p += n
			tokText := e.data[p : p+int(l)]
			p += int(l)
			if seen%997 == 0 { // decoding every id takes a while under -race
				s, err := c.Decode([]uint{uint(seen)})
				require.NoError(t, err)
				require.Equal(t, s, tokText, "%s id %d", tok, seen)
			}
		}
		require.Equal(t, len(e.ranks), seen, "%s: every token is distinct", tok)
	}
	counts, err := CountAll("hello world")
	require.NoError(t, err)
	require.Equal(t, Counts{O200k: 2, Cl100k: 2}, counts)
}

// corpus is the differential corpus: the seeds' texts, this repository's
// Go, SQL and docs, Go's own sources, and generated texts for the cases a
// pre-tokenizer gets wrong (CJK, emoji, marks, contractions, long runs of
// one character, runs of white space, invalid UTF-8).
func corpus(t testing.TB) []string {
	t.Helper()
	var texts []string
	add := func(root string, max int, exts ...string) {
		n := 0
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || n >= max {
				return fs.SkipDir
			}
			if d.IsDir() || !slices.Contains(exts, filepath.Ext(path)) {
				return nil
			}
			b, err := os.ReadFile(path)
			if err == nil && len(b) < 1<<20 {
				texts = append(texts, string(b))
				n++
			}
			return nil
		})
	}
	add("../../../shared/seeds", 100, ".txt", ".md")
	add("../..", 400, ".go", ".sql", ".md", ".yaml")
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	require.NoError(t, err, "go env GOROOT: Go's sources are part of the corpus")
	root := strings.TrimSpace(string(goroot))
	add(filepath.Join(root, "src", "net", "http"), 60, ".go")
	add(filepath.Join(root, "src", "unicode"), 20, ".go")
	require.Greater(t, len(texts), 100, "the corpus must find this repository's files")
	return append(texts, generated()...)
}

func generated() []string {
	texts := []string{
		"中文文本，更多内容。日本語のテキストです。한국어 텍스트입니다.",
		"emoji 👍🏽👨‍👩‍👧‍👦 flags 🇫🇷🇩🇪 and ⭐️ text",
		"नमस्ते दुनिया, e\u0301te\u0301, Ελληνικά, русский ТЕКСТ, عربى",
		"I'm sure you're right; they've said it'll do, HE'S IT'D 'll ' s",
		"dog'ſ 'Ll 'rE 'VE x'M y'D",
		"\u00a0\u0085\u2028\u2029\u3000 \t\v\f\r\n end\u00a0",
		"a\r\n\r\n\r\n   \n \tb  \n\n  c   ",
		"func main() {\n\tfmt.Println(\"hi\")\n}\n// path/to/file.go\n/*x*/\n",
		"12345678901234567890 1,234.56 ١٢٣٤ ⅷ ½",
		"\xff\xfe invalid \xc3\x28 utf8 \xe2\x82 end \xf0\x28\x8c\xbc",
		"\ufffd replacement \ufffd\ufffd",
		"HTTPServerURL getHTTPResponse XMLHttpRequest ǅungla ǈudi",
		"ªAAAAªAAAA ʰʰʰ Aʰa",
	}
	for _, unit := range []string{"a", "A", " ", "\n", ".", "1", "中", "👍", "é", "\u0301", "-", " a", "aA", "\r\n", "'s", "ab ", " \n", "\t\r\n", "\u00a0\n"} {
		texts = append(texts, strings.Repeat(unit, 3000))
	}
	r := rand.New(rand.NewPCG(11, 13))
	for range 400 {
		texts = append(texts, randomText(r, 200))
	}
	return texts
}

// TestChunksAndCountsMatchTiktoken is the differential test: every text of
// the corpus, chunk by chunk and count by count, under both tokenizers.
func TestChunksAndCountsMatchTiktoken(t *testing.T) {
	t.Parallel()
	texts := corpus(t)
	bytes := 0
	for _, s := range texts {
		checkExact(t, s)
		bytes += len(s)
	}
	t.Logf("%d texts, %d bytes", len(texts), bytes)
	require.Greater(t, bytes, 1<<20)
}

// FuzzCount compares chunks and counts with tiktoken-go on arbitrary input.
func FuzzCount(f *testing.F) {
	for _, s := range generated()[:13] {
		f.Add(s)
	}
	f.Add("x  \ny")
	f.Add("'")
	f.Add(" \u0301a")
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 8192 {
			return
		}
		checkExact(t, s)
	})
}

// BenchmarkCountVsTiktoken compares this package's count with tiktoken-go's
// on a ~500-byte text (the size) and a 64 KiB one.
func BenchmarkCountVsTiktoken(b *testing.B) {
	var text strings.Builder
	r := rand.New(rand.NewPCG(1, 2))
	words := strings.Fields("the refund policy says customers get their money back within five business days of a request; escalate fraud to the risk team, and note `order_id` values like ORD-20391 in the ticket")
	for text.Len() < 64<<10 {
		text.WriteString(words[r.IntN(len(words))])
		if r.IntN(12) == 0 {
			text.WriteString(".\n")
		} else {
			text.WriteByte(' ')
		}
	}
	for _, size := range []int{500, 64 << 10} {
		s := text.String()[:size]
		for _, tok := range tokenizers {
			b.Run(fmt.Sprintf("%s/%dB/contextd", tok, size), func(b *testing.B) {
				encodings[tokenizerIndex(tok)].load() // the vocabulary, once per process
				b.SetBytes(int64(size))
				for b.Loop() {
					if _, err := Count(tok, s); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run(fmt.Sprintf("%s/%dB/tiktoken-go", tok, size), func(b *testing.B) {
				c, _ := codec(tok)
				_, _ = c.Count("x")
				b.SetBytes(int64(size))
				for b.Loop() {
					if _, err := c.Count(s); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestMergeBucketsIsMergeHeap checks the bucket order against the heap on
// long chunks of every kind the corpus has, and that both orders are
// exercised: buckets where ranks stay in order, the heap where they do not.
func TestMergeBucketsIsMergeHeap(t *testing.T) {
	t.Parallel()
	fell := map[Tokenizer]int{}
	for _, s := range corpus(t) {
		if !utf8.ValidString(s) {
			continue
		}
		for _, tok := range tokenizers {
			e := encodings[tokenizerIndex(tok)]
			e.load()
			for _, c := range ourChunks(tok, s) {
				if len(c) < mergeHeapThreshold {
					continue
				}
				want := e.mergeHeap(c)
				got, ok := e.mergeBuckets(c)
				if !ok {
					fell[tok]++
					continue
				}
				require.Equal(t, want, got, "%s: %q", tok, c)
			}
		}
	}
	t.Logf("chunks the heap decided: %v", fell)
}

// BenchmarkLongWord counts one 2 MB word (the chunk is the whole text).
func BenchmarkLongWord(b *testing.B) {
	s := strings.Repeat("ab", 1_000_000)
	encodings[0].load()
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if _, err := Count(O200kBase, s); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLineBreakRuns counts 80 KB of " \n": every chunk is " \n", and
// chunking must not rescan the white space after it (it was quadratic:
// 3.5 s here; tiktoken-go takes about as long).
func BenchmarkLineBreakRuns(b *testing.B) {
	s := strings.Repeat(" \n", 40_000)
	encodings[0].load()
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		if _, err := Count(O200kBase, s); err != nil {
			b.Fatal(err)
		}
	}
}
