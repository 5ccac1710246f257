// Package token counts tokens exactly, with the tokenizers the models use
// (o200k_base by default, cl100k_base on request). The seeds estimated with
// characters ÷ 4; a budget is only honest when its counts are exact. Counts are
// taken once, when a version is written, and stored.
package token

import (
	"fmt"
	"sync"

	"github.com/tiktoken-go/tokenizer"
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

var codecs sync.Map // Tokenizer → tokenizer.Codec; loading a vocabulary is slow, so once each.

func codec(t Tokenizer) (tokenizer.Codec, error) {
	if c, ok := codecs.Load(t); ok {
		return c.(tokenizer.Codec), nil
	}
	var enc tokenizer.Encoding
	switch t {
	case O200kBase:
		enc = tokenizer.O200kBase
	case Cl100kBase:
		enc = tokenizer.Cl100kBase
	default:
		return nil, fmt.Errorf("unknown tokenizer %q", t)
	}
	c, err := tokenizer.Get(enc)
	if err != nil {
		return nil, fmt.Errorf("load tokenizer %s: %w", t, err)
	}
	actual, _ := codecs.LoadOrStore(t, c)
	return actual.(tokenizer.Codec), nil
}

// Count returns the exact number of tokens of text under t.
func Count(t Tokenizer, text string) (int, error) {
	if text == "" {
		return 0, nil
	}
	c, err := codec(t)
	if err != nil {
		return 0, err
	}
	n, err := c.Count(text)
	if err != nil {
		return 0, fmt.Errorf("count tokens: %w", err)
	}
	return n, nil
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
