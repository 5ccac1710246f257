package token

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

var tokenizers = []Tokenizer{O200kBase, Cl100kBase}

// checkPieces compares CountPieces with counting the joined text, once with
// every count known and once with a pattern of unknown ones.
func checkPieces(t testing.TB, tok Tokenizer, pieces []string, unknown func(int) bool) {
	t.Helper()
	want, err := Count(tok, strings.Join(pieces, ""))
	require.NoError(t, err)
	known := make([]int, len(pieces))
	for i, p := range pieces {
		known[i], err = Count(tok, p)
		require.NoError(t, err)
	}
	got, err := CountPieces(tok, pieces, known)
	require.NoError(t, err)
	if got != want {
		t.Fatalf("%s: CountPieces = %d, Count(joined) = %d, pieces %q", tok, got, want, pieces)
	}
	for i := range known {
		if unknown(i) {
			known[i] = -1
		}
	}
	got, err = CountPieces(tok, pieces, known)
	require.NoError(t, err)
	if got != want {
		t.Fatalf("%s: CountPieces (some unknown) = %d, Count(joined) = %d, pieces %q known %v", tok, got, want, pieces, known)
	}
}

func TestCountPiecesIssueExample(t *testing.T) {
	t.Parallel()
	a, b := "Keep it to two lines at most.\n", "\n### Current State\n"
	for _, tok := range tokenizers {
		na, err := Count(tok, a)
		require.NoError(t, err)
		nb, err := Count(tok, b)
		require.NoError(t, err)
		nab, err := Count(tok, a+b)
		require.NoError(t, err)
		require.Equal(t, []int{8, 5, 12}, []int{na, nb, nab}, tok) // ".\n" + "\n" → ".\n\n"
		got, err := CountPieces(tok, []string{a, b}, []int{na, nb})
		require.NoError(t, err)
		require.Equal(t, 12, got, tok)
	}
}

func TestCountPiecesNamedCases(t *testing.T) {
	t.Parallel()
	cases := map[string][]string{
		"empty list":          {},
		"empty pieces":        {"", "", ""},
		"empties between":     {"word", "", " next", ""},
		"digits across":       {"12", "34"},
		"digits across cuts":  {"price: 12", "345 dollars"},
		"digit groups":        {"a 1", "2", "3", "4", "5 b"},
		"contraction s":       {"it", "'s fine"},
		"contraction re":      {"you", "'re", " here"},
		"contraction split":   {"we'", "ll see"},
		"contraction split 2": {"we'l", "l see"},
		"contraction upper":   {"IT", "'S"},
		"spaces across":       {"a  ", "  b"},
		"space then word":     {"a ", "b"},
		"tab then punct":      {"x\t", ".y"},
		"newlines across":     {"line.\n", "\n", "\n## H\n"},
		"crlf split":          {"a\r", "\nb"},
		"crlf pieces":         {"a\r\n", "\r\n", "b\r\n"},
		"slash after newline": {"x.\n", "/y"},
		"one char pieces":     strings.Split("Hello, world! It's 2024.\n\n## Next\n", ""),
		"long word":           {strings.Repeat("abc", 200), strings.Repeat("def", 200)},
		"long spaces":         {"x" + strings.Repeat(" ", 300), strings.Repeat(" ", 300) + "y"},
		"long newlines":       {strings.Repeat("\n", 50), strings.Repeat("\n", 50)},
		"cjk":                 {"中文文本", "，更多内容。", "日本語のテキスト"},
		"emoji":               {"ok 👍", "🏽 done", "👨‍", "👩‍👧"},
		"marks":               {"cafe", "\u0301 au lait", "e\u0301"},
		"upper lower":         {"HTTP", "Server", "URL", "s"},
		"json":                {`{"id": 1`, `2, "name": "x"}`, `[1,2,3]`},
		"markdown blocks":     {"## Items\n", "- Refunds: take five days.\n", "- Shipping: two weeks.\n", "\n### Current State\n"},
		"nbsp and nel":        {"a\u00a0", "\u0085b", "\u2028", "\u3000c"},
		"split rune":          {"a\xe4\xb8", "\xad b"}, // 中 split across the junction
		"split rune merges":   {"中\xe6\x96", "\x87"},   // 中文 is one o200k token
		"devanagari marks":    {"नमस", "्ते", " दुनिया", "ा"},
		"invalid bytes":       {"a\xff", "\xfe b", "\x80"},
		"replacement char":    {"a\uFFFD", "\uFFFDb"},
		"one word alone":      {strings.Repeat("ab", 300)},
		"word between lines":  {"x.\n", strings.Repeat("ab", 300), "\nb"},
		"word after space":    {"- ", strings.Repeat("ab", 300), "\n"},
		"word between digits": {"1", "abc", "2"},
		"digits between":      {"a", "12", "b"},
		"words and lines":     {"\n", "word", "\n", "two words here", "\n", "end"},
		"word then empties":   {"\n", "word", "", "", "'s"},
		"split rune at end":   {"\n", "abc\xe4\xb8", "\xad"},
		"split rune at start": {"\xe4", "\xb8\xadabc", "\n"},
	}
	for name, pieces := range cases {
		for _, tok := range tokenizers {
			t.Run(name+"/"+string(tok), func(t *testing.T) {
				checkPieces(t, tok, pieces, func(i int) bool { return i%2 == 1 })
			})
		}
	}
}

// TestCountPiecesKeepsWholeChunks: a piece with no cut inside but clean cuts
// at both ends (a line that is one long word, between line breaks) is not
// counted again: its known count is used as given.
func TestCountPiecesKeepsWholeChunks(t *testing.T) {
	t.Parallel()
	word := strings.Repeat("ab", 5000)
	for _, tok := range tokenizers {
		nl, err := Count(tok, "\n")
		require.NoError(t, err)
		const marker = 1_000_000 // not word's count: shows which one was used
		got, err := CountPieces(tok, []string{"\n", word, "\n"}, []int{-1, marker, -1})
		require.NoError(t, err)
		require.Equal(t, marker+2*nl, got, tok)
		got, err = CountPieces(tok, []string{word}, []int{marker})
		require.NoError(t, err)
		require.Equal(t, marker, got, tok)
		// After a space the word's first chunk takes the space: recounted.
		want, err := Count(tok, " "+word)
		require.NoError(t, err)
		got, err = CountPieces(tok, []string{" ", word}, []int{-1, marker})
		require.NoError(t, err)
		require.Equal(t, want, got, tok)
	}
}

func TestCountPiecesErrors(t *testing.T) {
	t.Parallel()
	_, err := CountPieces(O200kBase, []string{"a"}, nil)
	require.Error(t, err)
	_, err = CountPieces("p50k_base", []string{"a"}, []int{1})
	require.Error(t, err)
	_, err = CountCached("p50k_base", "a")
	require.Error(t, err)
}

// fragments is the corpus random texts are built from.
var fragments = []string{
	"## Heading\n", "\n### Current State\n", "# Title", "#", "###",
	"- Title: content\n", "- Refund policy: Refunds take five days.\n", "- ", ": ", "\n- ",
	`{"id": 12, "name": "x", "tags": ["a", "b"]}`, `[1,2,3]`, `"key":"value"`, "{", "}", `":`,
	"func main() {\n\tfmt.Println(\"hi\")\n}\n", "if (a && b) { return 0; }", "x := y[i:j]", "//", "/*", "*/", "/",
	"中文文本，更多内容。", "日本語のテキスト", "한국어 텍스트", "中", "。", "，",
	"😀", "👍🏽", "👨‍👩‍👧", "🇫🇷", "\u200d",
	"a", "b", "e", "s", "t", "r", "l", "d", "m", "v", "S", "L", "E", "x", "word", "words", "The", "the", "HTTPServer", "URLs", "iPhone", "ABCdef", "ÉCOLE", "straße",
	"'", "'s", "'re", "'S", "'ll", "'Ve", "'d", "'m", "'t", "don", "it", "we", "’s",
	"1", "12", "123", "1234", "1234567890", "0.5", "3,000", "²", "٣", "Ⅻ",
	" ", "  ", "    ", "\t", "\t\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r", " \n", "\n ", "\u00a0", "\u0085", "\u2028", "\u3000", "\v", "\f",
	".", "...", ",", "?!", "\"", "(", ")", "—", "-", "--", "-----", "=====", "*", "**", "`", "```", "|", "<", ">", "&", "_", "~",
	"e\u0301", "\u0301", "\u0308", "\u094d", "\u093e", "न", "नमस्ते दुनिया", "สวัสดีครับ", "\u0e31",
	"\x00", "\x1f", "\x7f", "\uFFFD",
}

// randomText concatenates random fragments, with now and then a long run.
func randomText(r *rand.Rand, maxFrags int) string {
	var sb strings.Builder
	for range 1 + r.IntN(maxFrags) {
		switch r.IntN(20) {
		case 0:
			sb.WriteString(strings.Repeat(fragments[r.IntN(len(fragments))], 2+r.IntN(40)))
		case 1:
			sb.WriteString(strings.Repeat(string([]rune(" \n\ta1.中'")[r.IntN(8)]), 2+r.IntN(300)))
		default:
			sb.WriteString(fragments[r.IntN(len(fragments))])
		}
	}
	return sb.String()
}

// randomPieces builds pieces from fragments, and sometimes re-splits a
// random text at random byte offsets, rune boundaries or not.
func randomPieces(r *rand.Rand) []string {
	n := 1 + r.IntN(12)
	if r.IntN(4) == 0 {
		text := randomText(r, 30)
		var pieces []string
		for len(text) > 0 && len(pieces) < 40 {
			k := min(len(text), r.IntN(12))
			if r.IntN(3) > 0 { // mostly at rune boundaries
				for k < len(text) && !utf8.RuneStart(text[k]) {
					k++
				}
			}
			pieces = append(pieces, text[:k])
			text = text[k:]
		}
		return append(pieces, text)
	}
	pieces := make([]string, n)
	for i := range pieces {
		if r.IntN(10) == 0 {
			continue // an empty piece
		}
		pieces[i] = randomText(r, 5)
	}
	return pieces
}

func TestCountPiecesProperty(t *testing.T) {
	t.Parallel()
	iterations := 4000
	if testing.Short() {
		iterations = 500
	}
	for _, tok := range tokenizers {
		t.Run(string(tok), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(1, uint64(len(tok))))
			for range iterations {
				pieces := randomPieces(r)
				mask := r.Uint64()
				checkPieces(t, tok, pieces, func(i int) bool { return mask>>(i%64)&1 == 1 })
			}
		})
	}
}

// TestCleanCutLemma checks the lemma itself, at the level of token ids:
// wherever cleanCut holds, encoding X is encoding X[:k] then X[k:].
// Exhaustively over short strings of a small alphabet of the runes that
// matter (every class, the contraction letters, the newline suffixes), and
// over random texts.
func TestCleanCutLemma(t *testing.T) {
	t.Parallel()
	alphabet := []string{"a", "A", "s", "r", "e", "l", "'", "1", " ", "\t", "\n", "\r", "/", ".", "\u0301", "中", "\u00a0", "न", "\u094d", "\x7f"}
	maxLen := 4
	if testing.Short() {
		maxLen = 3
	}
	var texts []string
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		if n == 0 {
			texts = append(texts, prefix)
			return
		}
		for _, a := range alphabet {
			gen(prefix+a, n-1)
		}
	}
	for n := 2; n <= maxLen; n++ {
		gen("", n)
	}
	r := rand.New(rand.NewPCG(7, 7))
	for range 3000 {
		texts = append(texts, randomText(r, 8))
	}
	for _, tok := range tokenizers {
		t.Run(string(tok), func(t *testing.T) {
			t.Parallel()
			c, err := codec(tok)
			require.NoError(t, err)
			enc := func(s string) []uint {
				ids, _, err := c.Encode(s)
				require.NoError(t, err)
				return ids
			}
			cutsSeen := 0
			for _, x := range texts {
				whole := enc(x)
				for k := 1; k < len(x); k++ {
					cr, cn := utf8.DecodeLastRuneInString(x[:k])
					dr, dn := utf8.DecodeRuneInString(x[k:])
					if !cleanCut(cr, cn, dr, dn) {
						continue
					}
					cutsSeen++
					if split := append(enc(x[:k]), enc(x[k:])...); !slices.Equal(whole, split) {
						t.Fatalf("cut %d of %q (%q|%q): %v != %v", k, x, x[:k], x[k:], whole, split)
					}
				}
			}
			require.Greater(t, cutsSeen, 10000)
		})
	}
}

func TestCuts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p           string
		first, last int
		ok          bool
	}{
		{"- Title: content\n", 1, 16, true},
		{"\n### Current State\n", 1, 18, true},
		{"Keep it to two lines at most.\n", 4, 28, true},
		{"\n", 0, 0, false},
		{"12", 0, 0, false},
		{"  ", 0, 0, false},
		{"a\xff.", 0, 0, false},
		{"中文文本，更多", 4 * 3, 4 * 3, true},
	} {
		first, last, ok := cuts(tc.p)
		require.Equal(t, tc.ok, ok, "%q", tc.p)
		if ok {
			require.Equal(t, []int{tc.first, tc.last}, []int{first, last}, "%q", tc.p)
		}
	}
}

func TestCountCached(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("long text ", 40)
	for _, tok := range tokenizers {
		for _, s := range []string{"", "\n### Current State\n", "- ", long} {
			want, err := Count(tok, s)
			require.NoError(t, err)
			for range 2 {
				got, err := CountCached(tok, s)
				require.NoError(t, err)
				require.Equal(t, want, got, "%s %q", tok, s)
			}
		}
	}
}

// TestCountCachedBounded fills the cache far past its cap from many
// goroutines (run with -race) and checks every answer and the bound.
func TestCountCachedBounded(t *testing.T) {
	t.Parallel()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 6000 {
				s := fmt.Sprintf("## Heading %d-%d\n", g, i%3000)
				tok := tokenizers[i%2]
				want, err := Count(tok, s)
				require.NoError(t, err)
				got, err := CountCached(tok, s)
				require.NoError(t, err)
				require.Equal(t, want, got)
			}
		})
	}
	wg.Wait()
	for ti := range caches {
		total := 0
		for i := range caches[ti].shards {
			sh := &caches[ti].shards[i]
			sh.mu.Lock()
			require.LessOrEqual(t, len(sh.m), cacheShardCap)
			total += len(sh.m)
			sh.mu.Unlock()
		}
		require.LessOrEqual(t, total, cacheShards*cacheShardCap)
	}
}

// FuzzCountPieces cuts text into pieces of the lengths given by the bytes of
// lens (a byte's low 6 bits; its top bit marks the piece's count unknown)
// and compares CountPieces with counting text, under both tokenizers.
func FuzzCountPieces(f *testing.F) {
	f.Add("Keep it to two lines at most.\n\n### Current State\n", []byte{30})
	f.Add("1234", []byte{2})
	f.Add("it's you're", []byte{2, 0x80 | 5, 1})
	f.Add("a    b", []byte{3})
	f.Add("x.\n/y", []byte{3})
	f.Add("a\r\n\r\nb", []byte{2, 2})
	f.Add("中文文本，更多内容。", []byte{7, 3, 3})
	f.Add("ok 👍🏽 done", []byte{7, 0x80 | 4})
	f.Add("- Title: content\n- Other: more\n", []byte{17, 0x80 | 14})
	f.Add("HTTPServer'S URL", []byte{4, 6, 1, 2})
	f.Add(`{"id": 12, "xs": [1,2,3]}`, []byte{9, 1, 1, 1, 1, 1})
	f.Add("\u00a0\u0085x\u2028", []byte{1, 1, 1, 1})
	f.Fuzz(func(t *testing.T, text string, lens []byte) {
		if len(text) > 4096 || len(lens) > 64 {
			return
		}
		var pieces []string
		var unknown []bool
		rest := text
		for _, b := range lens {
			k := min(len(rest), int(b&0x3f))
			pieces = append(pieces, rest[:k])
			unknown = append(unknown, b&0x80 != 0)
			rest = rest[k:]
		}
		pieces = append(pieces, rest)
		unknown = append(unknown, false)
		for _, tok := range tokenizers {
			checkPieces(t, tok, pieces, func(i int) bool { return unknown[i] })
		}
	})
}

// FuzzCleanCut checks the lemma on arbitrary text: at every cut cleanCut
// accepts, encoding the text is encoding the two sides, token for token.
func FuzzCleanCut(f *testing.F) {
	for _, s := range []string{"a'se it's", "x /\n/ y", "नमस्ते", "中文，更多", "a  b\t.c", "12 34\r\n5", "HTTPServer'S", "e\u0301 1"} {
		f.Add(s)
	}
	codecs := make(map[Tokenizer]func(string) []uint)
	for _, tok := range tokenizers {
		c, err := codec(tok)
		require.NoError(f, err)
		codecs[tok] = func(s string) []uint { ids, _, _ := c.Encode(s); return ids }
	}
	f.Fuzz(func(t *testing.T, x string) {
		if len(x) > 512 {
			return
		}
		for tok, enc := range codecs {
			whole := enc(x)
			for k := 1; k < len(x); k++ {
				cr, cn := utf8.DecodeLastRuneInString(x[:k])
				dr, dn := utf8.DecodeRuneInString(x[k:])
				if cleanCut(cr, cn, dr, dn) && !slices.Equal(whole, append(enc(x[:k]), enc(x[k:])...)) {
					t.Fatalf("%s: cut %d of %q is not clean", tok, k, x)
				}
			}
		}
	})
}

// packet builds a realistic ~16k-token markdown packet of about 60 pieces:
// scaffolding headings and lines, and entry blocks "- Title: content\n".
func packet() []string {
	r := rand.New(rand.NewPCG(42, 42))
	words := strings.Fields(`the a refund policy customer order shipping days within returns
		account billing invoice support team escalation priority ticket status pending
		resolved because when if and or not never always must should may include exclude
		service agreement terms conditions data privacy export deletion request review
		API endpoint returns JSON error code 404 500 timeout retry backoff limit quota
		it's they're we'll don't can't users' version v2.3.1 2024-05-01 $19.99 50% e.g.`)
	sentence := func() string {
		n := 8 + r.IntN(16)
		ws := make([]string, n)
		for i := range ws {
			ws[i] = words[r.IntN(len(words))]
		}
		ws[0] = strings.ToUpper(ws[0][:1]) + ws[0][1:]
		return strings.Join(ws, " ") + []string{".", ".", ".", "?", "!", ":"}[r.IntN(6)]
	}
	var pieces []string
	pieces = append(pieces, "# Context packet\n", "\nAnswer using only the entries below. Keep it to two lines at most.\n")
	for s := range 5 {
		pieces = append(pieces, fmt.Sprintf("\n## Section %d: %s\n\n", s+1, sentence()))
		for range 11 {
			var body strings.Builder
			for range 8 + r.IntN(8) {
				body.WriteString(sentence())
				body.WriteString(" ")
			}
			if r.IntN(3) == 0 {
				body.WriteString("\n  ```json\n  {\"id\": 12, \"status\": \"pending\"}\n  ```")
			}
			pieces = append(pieces, fmt.Sprintf("- %s: %s\n", strings.TrimSuffix(sentence(), "."), strings.TrimSpace(body.String())))
		}
	}
	return append(pieces, "\n### Current State\n", "Nothing pending.\n")
}

func benchPacket(b *testing.B) (pieces []string, known []int, joined string) {
	pieces = packet()
	known = make([]int, len(pieces))
	for i, p := range pieces {
		n, err := Count(O200kBase, p)
		if err != nil {
			b.Fatal(err)
		}
		known[i] = n
	}
	joined = strings.Join(pieces, "")
	want, err := Count(O200kBase, joined)
	if err != nil {
		b.Fatal(err)
	}
	got, err := CountPieces(O200kBase, pieces, known)
	if err != nil || got != want {
		b.Fatalf("CountPieces = %d, %v; want %d", got, err, want)
	}
	b.SetBytes(int64(len(joined)))
	b.Cleanup(func() { // after b.Loop, which would reset the metrics
		b.ReportMetric(float64(want), "tokens")
		b.ReportMetric(float64(len(pieces)), "pieces")
	})
	return pieces, known, joined
}

func BenchmarkCountPieces(b *testing.B) {
	pieces, known, _ := benchPacket(b)
	b.ResetTimer()
	for b.Loop() {
		if _, err := CountPieces(O200kBase, pieces, known); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCountPiecesCold empties the short-count cache before each run,
// so every head, tail and window is tokenized: the cost without repetition.
func BenchmarkCountPiecesCold(b *testing.B) {
	pieces, known, _ := benchPacket(b)
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		for i := range caches[0].shards {
			sh := &caches[0].shards[i]
			sh.mu.Lock()
			clear(sh.m)
			sh.mu.Unlock()
		}
		b.StartTimer()
		if _, err := CountPieces(O200kBase, pieces, known); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCountWhole(b *testing.B) {
	_, _, joined := benchPacket(b)
	b.ResetTimer()
	for b.Loop() {
		if _, err := Count(O200kBase, joined); err != nil {
			b.Fatal(err)
		}
	}
}
