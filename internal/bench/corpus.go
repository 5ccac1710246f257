package bench

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"

	"github.com/contextd/contextd/internal/auth"
)

// Roles are the agent roles of the workload; some items are hidden from
// one of them.
var Roles = []string{"implementer", "critic", "reviewer", "planner"}

// Tools are the tool names of tool items and of the packets' tool results.
var Tools = []string{"read_file", "run_tests", "grep", "git_diff", "http_get", "sql_query", "deploy", "lookup_order"}

// SharedProject is the layer every project's packets read as well.
const SharedProject = "_shared"

// VocabSize is the number of words of the corpus's vocabulary.
const VocabSize = 3000

// Trigger is an item's trigger as the contract writes it: exactly one member.
type Trigger struct {
	Always    bool     `json:"always,omitempty"`
	Keywords  []string `json:"keywords,omitempty"`
	Tool      string   `json:"tool,omitempty"`
	Relevance bool     `json:"relevance,omitempty"`
}

// Kind is the trigger's kind: always, keywords, tool or relevance.
func (t Trigger) Kind() string {
	switch {
	case t.Always:
		return "always"
	case len(t.Keywords) > 0:
		return "keywords"
	case t.Tool != "":
		return "tool"
	default:
		return "relevance"
	}
}

// ItemRoles is an item's roles member.
type ItemRoles struct {
	HiddenFrom []string `json:"hidden_from,omitempty"`
}

// Item is one item of the corpus, in the contract's BatchItem shape (Key
// is left out of a PUT body, which does not take it).
type Item struct {
	Key        string     `json:"key,omitempty"`
	Kind       string     `json:"kind"`
	Source     string     `json:"source"`
	Title      string     `json:"title"`
	Summary    string     `json:"summary,omitempty"`
	Content    string     `json:"content"`
	Priority   int        `json:"priority"`
	Authority  string     `json:"authority"`
	Confidence string     `json:"confidence"`
	StateKey   string     `json:"state_key,omitempty"`
	Slot       string     `json:"slot,omitempty"`
	Trigger    Trigger    `json:"trigger"`
	Roles      *ItemRoles `json:"roles,omitempty"`
	Template   bool       `json:"template,omitempty"`
}

// HiddenFrom reports whether the item is hidden from role.
func (it *Item) HiddenFrom(role string) bool {
	if it.Roles == nil {
		return false
	}
	for _, r := range it.Roles.HiddenFrom {
		if r == role {
			return true
		}
	}
	return false
}

// Corpus generates the bench's items and texts deterministically from a
// seed: the same seed gives the same vocabulary and the same items.
type Corpus struct {
	Seed  uint64
	Vocab []string
}

// NewCorpus builds the vocabulary of seed: VocabSize distinct English-like
// words of one to three syllables.
func NewCorpus(seed uint64) *Corpus {
	rng := rand.New(rand.NewPCG(seed, 0x766f636162)) // "vocab"
	onsets := []string{"b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "y", "z",
		"bl", "br", "ch", "cl", "cr", "dr", "fl", "fr", "gl", "gr", "pl", "pr", "sc", "sh", "sl", "sp", "st", "th", "tr", "wh"}
	nuclei := []string{"a", "e", "i", "o", "u", "a", "e", "i", "o", "ai", "ea", "ee", "io", "oa", "oo", "ou", "ie"}
	codas := []string{"", "", "", "n", "r", "s", "t", "l", "m", "d", "nd", "st", "ck", "ng", "rt", "ll", "sh", "nt"}
	seen := make(map[string]bool, VocabSize)
	words := make([]string, 0, VocabSize)
	for len(words) < VocabSize {
		var b strings.Builder
		syllables := 1 + rng.IntN(3)
		for s := 0; s < syllables; s++ {
			if s == 0 || rng.IntN(3) > 0 {
				b.WriteString(onsets[rng.IntN(len(onsets))])
			}
			b.WriteString(nuclei[rng.IntN(len(nuclei))])
			if s == syllables-1 || rng.IntN(4) == 0 {
				b.WriteString(codas[rng.IntN(len(codas))])
			}
		}
		w := b.String()
		if len(w) < 3 || seen[w] {
			continue
		}
		seen[w] = true
		words = append(words, w)
	}
	return &Corpus{Seed: seed, Vocab: words}
}

// Word is a random word of the vocabulary.
func (c *Corpus) Word(rng *rand.Rand) string { return c.Vocab[rng.IntN(len(c.Vocab))] }

// Words is n random words joined by spaces.
func (c *Corpus) Words(rng *rand.Rand, n int) string {
	ws := make([]string, n)
	for i := range ws {
		ws[i] = c.Word(rng)
	}
	return strings.Join(ws, " ")
}

// Text is prose of exactly n bytes (n > 0): sentences of 5 to 16 words,
// capitalised and ended by a full stop (the last one cut at n).
func (c *Corpus) Text(rng *rand.Rand, n int) string {
	var b strings.Builder
	b.Grow(n + 32)
	for b.Len() < n {
		words := 5 + rng.IntN(12)
		for i := 0; i < words; i++ {
			w := c.Word(rng)
			if i == 0 {
				w = strings.ToUpper(w[:1]) + w[1:]
			}
			b.WriteString(w)
			if i < words-1 {
				b.WriteByte(' ')
			}
		}
		b.WriteString(". ")
	}
	return b.String()[:n-1] + "."
}

// Key is the key of item i of a layer.
func Key(project string, i int) string {
	if project == SharedProject {
		return fmt.Sprintf("shared-%06d", i)
	}
	return fmt.Sprintf("item-%06d", i)
}

func layerStream(project string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(project))
	return h.Sum64()
}

// pick returns one of vals with the given weights (same length).
func pick(rng *rand.Rand, vals []string, weights []int) string {
	total := 0
	for _, w := range weights {
		total += w
	}
	n := rng.IntN(total)
	for i, w := range weights {
		if n < w {
			return vals[i]
		}
		n -= w
	}
	return vals[len(vals)-1]
}

var (
	kindVals       = []string{"knowledge", "instruction", "decision", "episode", "skill", "evidence", "state"}
	kindWeights    = []int{40, 15, 10, 10, 8, 9, 8}
	authVals       = []string{"policy", "instruction", "evidence", "hypothesis"}
	authWeights    = []int{10, 25, 45, 20}
	confVals       = []string{"verified", "probable", "uncertain"}
	confWeights    = []int{30, 50, 20}
	sourceVals     = []string{"project", "file", "git", "memory", "human", "rag", "session_summary", "decision"}
	sourceWeights  = []int{30, 15, 10, 15, 10, 10, 5, 5}
	stateGroupEach = 100 // one contradiction group per this many always-on items
)

// Layer generates the n items of one layer (a bench project or _shared):
// a fraction always of always-on items, the rest split evenly, at random,
// among keyword, tool and relevance items; every 100th always-on item
// starts a group of 2 or 3 always-on state items sharing a state_key (a
// contradiction); ~7% are hidden from one role, ~1% are templates.
// Contents are 200 to 2,000 bytes.
func (c *Corpus) Layer(project string, n int, always float64) []Item {
	rng := rand.New(rand.NewPCG(c.Seed, layerStream(project)))
	items := make([]Item, n)
	alwaysN, groupLeft, group := 0, 0, 0
	for i := range items {
		it := &items[i]
		it.Key = Key(project, i)
		it.Kind = pick(rng, kindVals, kindWeights)
		it.Source = pick(rng, sourceVals, sourceWeights)
		it.Authority = auth.Capped(pick(rng, authVals, authWeights), auth.SourceCeiling(it.Source)) // as contextd enforces it
		it.Confidence = pick(rng, confVals, confWeights)
		it.Priority = rng.IntN(11)
		it.Title = strings.ToUpper(c.Word(rng)[:1]) + c.Words(rng, 1+rng.IntN(5))[1:]
		if rng.IntN(4) == 0 {
			it.Summary = c.Text(rng, 60+rng.IntN(100))
		}
		if rng.Float64() < always {
			it.Trigger = Trigger{Always: true}
			inGroup := groupLeft > 0
			if inGroup {
				groupLeft--
			} else if alwaysN%stateGroupEach == 0 {
				group, groupLeft, inGroup = group+1, 1+rng.IntN(2), true // 2 or 3 members
			}
			if inGroup {
				it.StateKey = fmt.Sprintf("state.%s.%d", strings.TrimPrefix(project, "_"), group)
				it.Kind = "state"
			}
			alwaysN++
		} else {
			switch rng.IntN(3) {
			case 0:
				kws := make([]string, 1+rng.IntN(3))
				for k := range kws {
					kws[k] = c.Word(rng)
				}
				it.Trigger = Trigger{Keywords: kws}
			case 1:
				it.Trigger = Trigger{Tool: Tools[rng.IntN(len(Tools))]}
				it.Slot, it.Kind = "tools", "tool"
			default:
				it.Trigger = Trigger{Relevance: true}
			}
		}
		if rng.IntN(100) < 7 {
			it.Roles = &ItemRoles{HiddenFrom: []string{Roles[rng.IntN(len(Roles))]}}
		}
		size := 200 + rng.IntN(1801)
		if rng.IntN(100) == 0 {
			it.Template = true
			prefix := "In {{project}}, for the {{target_role}}: "
			if rng.IntN(2) == 0 {
				prefix = "While working on {{task.objective}} in {{project}}: "
			}
			it.Content = prefix + c.Text(rng, size-len(prefix))
		} else {
			it.Content = c.Text(rng, size)
		}
	}
	return items
}
