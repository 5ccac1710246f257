package auth

import (
	"fmt"
	"strings"

	"github.com/contextd/contextd/internal/fault"
	"github.com/contextd/contextd/internal/validation"
)

// Authorities, strongest first: how much an item's words weigh against
// another's when they contradict (see package assemble).
const (
	Policy      = "policy"
	Instruction = "instruction"
	Evidence    = "evidence"
	Hypothesis  = "hypothesis"
)

var authorityRank = map[string]int{Policy: 4, Instruction: 3, Evidence: 2, Hypothesis: 1}

// ValidAuthority reports whether a is one of the four authorities.
func ValidAuthority(a string) bool { return authorityRank[a] > 0 }

// DefaultMaxAuthority is the ceiling an agent gets when none is granted
// explicitly: admins may write policy, every other agent instruction.
func DefaultMaxAuthority(p Permission) string {
	if p == Admin {
		return Policy
	}
	return Instruction
}

// Capped is authority a capped at b: the weaker of the two.
func Capped(a, b string) string {
	if authorityRank[a] <= authorityRank[b] {
		return a
	}
	return b
}

// SourceCeiling is the highest authority an item of a source may claim.
// It fails closed: only sources that stand for a person or a process the
// deployment runs may reach policy; a repository, the project itself and a
// recorded decision may instruct; everything else (peers, tools, retrieval,
// memory, other:*) is evidence at most, as in KXM, whose floor is human and
// workflow policy, git instruction, the rest evidence.
func SourceCeiling(source string) string {
	switch source {
	case "human", "workflow", "steering":
		return Policy
	case "git", "project", "decision":
		return Instruction
	}
	return Evidence
}

// Claim is one item's claimed authority and source, at its JSON Pointer
// ("" for a single write, "/items/3" in a batch).
type Claim struct {
	Pointer, Authority, Source string
}

// GrantError is a write whose items claim more authority than their writer
// or their source may: 403 authority_exceeds_grant, one field per item.
type GrantError struct{ Fields []validation.Field }

func (e *GrantError) Error() string {
	parts := make([]string, len(e.Fields))
	for i, f := range e.Fields {
		parts[i] = f.Detail
	}
	return strings.Join(parts, "; ")
}

// Is makes a GrantError forbidden.
func (e *GrantError) Is(target error) bool { return target == fault.ErrForbidden }

// Ceiling is the highest authority the agent's item writes may claim: its
// max_authority, its permission's default when unset (an agent made before
// ceilings existed).
func (a *Agent) Ceiling() string {
	if a.MaxAuthority == "" {
		return DefaultMaxAuthority(a.Permission)
	}
	return a.MaxAuthority
}

// CheckAuthority refuses claims above the agent's max_authority or their
// source's ceiling, naming the cap that each breaks. Unknown authorities
// are left to validation.
func (a *Agent) CheckAuthority(claims []Claim) error {
	var fields []validation.Field
	for _, c := range claims {
		r, ok := authorityRank[c.Authority]
		if !ok {
			continue
		}
		var detail string
		switch src := SourceCeiling(c.Source); {
		case r > authorityRank[a.Ceiling()]:
			detail = fmt.Sprintf("authority %q exceeds this agent's max_authority %q", c.Authority, a.Ceiling())
		case r > authorityRank[src]:
			detail = fmt.Sprintf("authority %q exceeds the ceiling %q of source %q", c.Authority, src, c.Source)
		default:
			continue
		}
		fields = append(fields, validation.Field{Pointer: c.Pointer + "/authority", Code: "authority_exceeds_grant", Detail: detail})
	}
	if fields == nil {
		return nil
	}
	return &GrantError{Fields: fields}
}
