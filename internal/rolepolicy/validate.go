package rolepolicy

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/contextd/contextd/internal/ctxtype"
	"github.com/contextd/contextd/internal/item"
	"github.com/contextd/contextd/internal/limits"
	"github.com/contextd/contextd/internal/render"
	"github.com/contextd/contextd/internal/validation"
)

// MaxEntriesPerSection bounds a section's cap (max_per_section): more
// would be no cap at all, as no packet holds so many entries.
const MaxEntriesPerSection = 1000

// sectionNames are the sections a policy may cap: the item sections of a
// packet, in their order (Active Contradictions lists pairs, not entries).
var sectionNames = slices.DeleteFunc(slices.Clone(render.SectionOrder), func(s string) bool { return s == render.ActiveContradictions })

// kinds are the item kinds a policy may name.
var kinds = []string{"knowledge", "state", "episode", "skill", "decision", "instruction", "evidence", "tool"}

// checkRole refuses, as the role parameter, a role no agent can have.
func checkRole(role string) error {
	var errs validation.List
	addRole(&errs, role)
	return errs.Err()
}

func addRole(errs *validation.List, role string) {
	if strings.TrimSpace(role) == "" {
		errs.Add("role", "required", "role is required")
	}
	limits.Chars(errs, "role", role, limits.Get().Role)
}

// Check validates a policy layer for role, every problem by JSON Pointer
// into the request body (the role as its parameter): a budget out of
// [1, ctxtype.MaxBudget], max without a budget, a kind, section, format
// or tokenizer that does not exist, a kind named twice, an empty kinds
// list, or a section cap out of [0, MaxEntriesPerSection].
func Check(role string, p ctxtype.RolePolicy) error {
	var errs validation.List
	addRole(&errs, role)
	if b := p.TokenBudget; b != nil && (*b < 1 || *b > ctxtype.MaxBudget) {
		errs.Add("/token_budget", "range", "token_budget must be between 1 and %d, not %d", ctxtype.MaxBudget, *b)
	}
	if p.Max && p.TokenBudget == nil {
		errs.Add("/max", "required", "max makes the layer's token_budget a ceiling: it needs a token_budget")
	}
	if p.Kinds != nil && len(p.Kinds) == 0 {
		errs.Add("/kinds", "range", "kinds must name at least one kind (leave it out for every kind)")
	}
	// Every kind once, every section once: longer lists are refused whole,
	// before their entries are looked at.
	if len(p.Kinds) > len(kinds) {
		errs.Add("/kinds", "too_many", "at most %d kinds, not %d", len(kinds), len(p.Kinds))
		p.Kinds = nil
	}
	if len(p.MaxPerSection) > len(sectionNames) {
		errs.Add("/max_per_section", "too_many", "at most %d sections, not %d", len(sectionNames), len(p.MaxPerSection))
		p.MaxPerSection = nil
	}
	for i, k := range p.Kinds {
		switch {
		case !item.ValidKind(k):
			errs.Add(fmt.Sprintf("/kinds/%d", i), "enum", "kind must be one of %s, not %s", strings.Join(kinds, ", "), validation.QuoteShort(k))
		case slices.Index(p.Kinds, k) < i:
			errs.Add(fmt.Sprintf("/kinds/%d", i), "duplicate", "kind %q is named twice", k)
		}
	}
	for _, sec := range slices.Sorted(maps.Keys(p.MaxPerSection)) {
		at := "/max_per_section/" + validation.EscapePointer(sec)
		n := p.MaxPerSection[sec]
		switch {
		case !slices.Contains(sectionNames, sec):
			errs.Add(at, "enum", "section must be one of %s, not %s", strings.Join(sectionNames, ", "), validation.QuoteShort(sec))
		case n < 0 || n > MaxEntriesPerSection:
			errs.Add(at, "range", "a section's cap must be between 0 and %d, not %d", MaxEntriesPerSection, n)
		}
	}
	if p.Format != "" && !p.Format.Valid() {
		errs.Add("/format", "enum", "format must be markdown, blocks, json, kxm or navi, not %s", validation.QuoteShort(string(p.Format)))
	}
	if p.Tokenizer != "" && !p.Tokenizer.Valid() {
		errs.Add("/tokenizer", "enum", "tokenizer must be o200k_base or cl100k_base, not %s", validation.QuoteShort(string(p.Tokenizer)))
	}
	return errs.Err()
}
