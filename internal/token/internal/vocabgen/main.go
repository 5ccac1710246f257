// Command vocabgen writes the byte-pair ranks of o200k_base and cl100k_base
// as internal/token reads them (ranks.go): for each rank from 0, its token's
// length as a uvarint, then its bytes. The ranks come from
// github.com/tiktoken-go/tokenizer, decoded one id at a time, so the product
// carries a compact copy of the vocabularies and never loads that package's
// maps; the token tests compare every count with it.
//
// Run by `make generate` (go run ./internal/token/internal/vocabgen
// internal/token); `make verify` fails when the committed files differ.
package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tiktoken-go/tokenizer"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: vocabgen DIR")
		os.Exit(2)
	}
	for _, enc := range []tokenizer.Encoding{tokenizer.O200kBase, tokenizer.Cl100kBase} {
		if err := write(os.Args[1], enc); err != nil {
			fmt.Fprintf(os.Stderr, "vocabgen: %s: %v\n", enc, err)
			os.Exit(1)
		}
	}
}

// write decodes ids 0, 1, … until the first id the codec does not know
// after the last ordinary token; special tokens (<|endoftext|> and the like)
// are never produced by counting text, so they are left out.
func write(dir string, enc tokenizer.Encoding) error {
	c, err := tokenizer.Get(enc)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	n := 0
	for id := uint(0); ; id++ {
		s, err := c.Decode([]uint{id})
		if err != nil {
			break
		}
		if len(s) > 0 && s[0] == '<' && len(s) > 4 && s[1] == '|' {
			if _, special := specials[s]; special {
				break
			}
		}
		out.Write(binary.AppendUvarint(nil, uint64(len(s))))
		out.WriteString(s)
		n++
	}
	if n == 0 {
		return fmt.Errorf("no tokens decoded")
	}
	return os.WriteFile(filepath.Join(dir, string(enc)+".ranks"), out.Bytes(), 0o644)
}

var specials = map[string]struct{}{"<|endoftext|>": {}, "<|endofprompt|>": {}, "<|fim_prefix|>": {}}
