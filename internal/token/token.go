// Package token counts tokens exactly, with the tokenizers the models use
// (o200k_base by default, cl100k_base on request). The seeds estimated with
// characters ÷ 4; a budget is only honest when its counts are exact. Counts are
// taken once, when a version is written, and stored.
package token

import (
	"fmt"
	"unicode/utf8"
)

// Tokenizer names a supported encoding.
type Tokenizer string

// The supported tokenizers.
const (
	O200kBase  Tokenizer = "o200k_base"
	Cl100kBase Tokenizer = "cl100k_base"
)

// Default is the tokenizer used when a request names none.
const Default = O200kBase

// Valid reports whether t is a supported tokenizer.
func (t Tokenizer) Valid() bool { return t == O200kBase || t == Cl100kBase }

// Count returns the exact number of tokens of text under t: the count
// tiktoken's encoder gives (tiktoken-go's here, which the tests compare it
// with), computed by this package's own pre-tokenizers and byte-pair merge
// (split.go, bpe.go) in time linear in the text.
func Count(t Tokenizer, text string) (int, error) {
	ti := tokenizerIndex(t)
	if ti < 0 {
		return 0, fmt.Errorf("unknown tokenizer %q", t)
	}
	if text == "" {
		return 0, nil
	}
	if !utf8.ValidString(text) {
		text = replaceInvalid(text)
	}
	return encodings[ti].count(text), nil
}

// Counts holds a text's count under every supported tokenizer, as stored
// with each item version.
type Counts struct {
	O200k  int
	Cl100k int
}

// CountAll counts text under every supported tokenizer.
func CountAll(text string) (Counts, error) {
	o, err := Count(O200kBase, text)
	if err != nil {
		return Counts{}, err
	}
	c, err := Count(Cl100kBase, text)
	if err != nil {
		return Counts{}, err
	}
	return Counts{O200k: o, Cl100k: c}, nil
}
