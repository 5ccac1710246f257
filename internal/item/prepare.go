package item

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/render"
	"github.com/contextd/contextd/internal/token"
)

// prepared is a validated write with everything computed that does not
// need the database: hashes and exact token counts.
type prepared struct {
	key        string
	fields     ctxtype.Fields
	fieldsHash []byte
	content    []byte // sha256
	tokens     token.Counts
	block      token.Counts // the markdown block, see render.MarkdownItemBlock
	search     *string      // the search vector, when computed ahead (store.NewVersion.Search)
}

func prepare(key string, f ctxtype.Fields) (prepared, error) {
	canon, err := json.Marshal(f)
	if err != nil {
		return prepared{}, fmt.Errorf("encode fields: %w", err)
	}
	fh := sha256.Sum256(canon)
	ch := sha256.Sum256([]byte(f.Content))
	counts, block, err := countContentAndBlock(f.Title, f.Content)
	if err != nil {
		return prepared{}, err
	}
	return prepared{key: key, fields: f, fieldsHash: fh[:], content: ch[:], tokens: counts, block: block}, nil
}

// countContentAndBlock counts the content and its markdown block under
// every tokenizer in one pass over the content: each line of it is counted
// once, and token.CountPieces adds the lines up with what lies between them,
// the content's "\n" or the block's lead and indented line breaks.
func countContentAndBlock(title, content string) (tokens, block token.Counts, err error) {
	pieces := render.MarkdownItemBlockPieces(title, content)
	lines := make([]string, 0, len(pieces)/2)
	for i := 1; i < len(pieces); i += 2 {
		lines = append(lines, pieces[i])
	}
	joinable := strings.Join(lines, "\n") == content // no "\r\n", no trailing line breaks
	for _, t := range []token.Tokenizer{token.O200kBase, token.Cl100kBase} {
		known := make([]int, len(pieces))
		for i := range known {
			known[i] = -1
			if i%2 == 1 {
				if known[i], err = token.Count(t, pieces[i]); err != nil {
					return tokens, block, err
				}
			}
		}
		b, err := token.CountPieces(t, pieces, known)
		if err != nil {
			return tokens, block, err
		}
		var c int
		if joinable { // the content is the lines and "\n" between them
			c, err = token.CountPieces(t, interleave(lines), interleaveKnown(known))
		} else {
			c, err = token.Count(t, content)
		}
		if err != nil {
			return tokens, block, err
		}
		if t == token.O200kBase {
			tokens.O200k, block.O200k = c, b
		} else {
			tokens.Cl100k, block.Cl100k = c, b
		}
	}
	return tokens, block, nil
}

// interleave puts "\n" between lines; interleaveKnown gives its counts
// from the block's: the lines' at the block pieces' odd indices, -1 (count
// it) for each "\n".
func interleave(lines []string) []string {
	out := make([]string, 0, 2*len(lines))
	for i, l := range lines {
		if i > 0 {
			out = append(out, "\n")
		}
		out = append(out, l)
	}
	return out
}

func interleaveKnown(blockKnown []int) []int {
	out := make([]int, 0, len(blockKnown))
	for i := 1; i < len(blockKnown); i += 2 {
		if i > 1 {
			out = append(out, -1)
		}
		out = append(out, blockKnown[i])
	}
	return out
}

// prepareAll prepares writes on workers goroutines (at least one): exact
// token counts are the costly part of a large batch, and they need no
// database.
func prepareAll(keys []string, fields []ctxtype.Fields, workers int) ([]prepared, error) {
	out := make([]prepared, len(keys))
	errs := make([]error, len(keys))
	workers = max(1, min(workers, len(keys)))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(keys); i += workers {
				out[i], errs[i] = prepare(keys[i], fields[i])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}
