package ctxtype

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/contextd/contextd/internal/token"
)

// The members of a role policy, as its layers, its API and a packet's
// stored policy name them. max goes with token_budget: the layer that sets
// the budget says whether it is a ceiling.
const (
	MemberTokenBudget   = "token_budget"
	MemberKinds         = "kinds"
	MemberMaxPerSection = "max_per_section"
	MemberFormat        = "format"
	MemberTokenizer     = "tokenizer"
)

// LayerRequest is the layer of a member the packet's request gave itself.
const LayerRequest = "request"

// PolicyMembers are the members of a role policy in their order.
var PolicyMembers = []string{MemberTokenBudget, MemberKinds, MemberMaxPerSection, MemberFormat, MemberTokenizer}

// ReasonRolePolicy means the role's policy left the item out: its kind is
// not among the policy's kinds, or its section already held the most
// entries the policy allows.
const ReasonRolePolicy = "role_policy"

// RolePolicy is one layer of a role's policy (a project's, or _shared's
// for every project): the members it sets. A nil or empty member is one
// the layer leaves to the layer under it. Serving many agents of one role
// then does not mean every caller restating its budget and filters.
type RolePolicy struct {
	// TokenBudget is the budget of a packet whose request names none;
	// with Max it is also the most a request may name.
	TokenBudget *int `json:"token_budget,omitempty"`
	Max         bool `json:"max,omitempty"`
	// Kinds are the item kinds the role's packets hold (nil: every kind).
	Kinds []string `json:"kinds,omitempty"`
	// MaxPerSection is, by section name, the most entries a section holds.
	MaxPerSection map[string]int  `json:"max_per_section,omitempty"`
	Format        Format          `json:"format,omitempty"`
	Tokenizer     token.Tokenizer `json:"tokenizer,omitempty"`
}

// Empty reports whether the layer sets no member: no policy.
func (p RolePolicy) Empty() bool {
	return p.TokenBudget == nil && len(p.Kinds) == 0 && len(p.MaxPerSection) == 0 && p.Format == "" && p.Tokenizer == ""
}

// PolicyLayer is a layer of a role's policy and the project it is set in.
type PolicyLayer struct {
	Project string
	Policy  RolePolicy
}

// EffectivePolicy is a role's policy as its layers combine: each member
// from the highest layer that sets it (a project's over _shared's).
type EffectivePolicy struct {
	Role string `json:"role"`
	RolePolicy
	// Layers names, for each member set, the project of the layer that
	// set it (_shared or the project).
	Layers map[string]string `json:"layers"`
}

// Effective combines the layers of role's policy, lowest first (_shared,
// then the project), member by member.
func Effective(role string, layers ...PolicyLayer) EffectivePolicy {
	e := EffectivePolicy{Role: role, Layers: map[string]string{}}
	for _, l := range layers {
		p := l.Policy
		if p.TokenBudget != nil {
			b := *p.TokenBudget
			e.TokenBudget, e.Max, e.Layers[MemberTokenBudget] = &b, p.Max, l.Project
		}
		if len(p.Kinds) > 0 {
			e.Kinds, e.Layers[MemberKinds] = slices.Clone(p.Kinds), l.Project
		}
		if len(p.MaxPerSection) > 0 {
			e.MaxPerSection, e.Layers[MemberMaxPerSection] = p.MaxPerSection, l.Project
		}
		if p.Format != "" {
			e.Format, e.Layers[MemberFormat] = p.Format, l.Project
		}
		if p.Tokenizer != "" {
			e.Tokenizer, e.Layers[MemberTokenizer] = p.Tokenizer, l.Project
		}
	}
	return e
}

// AppliedPolicy is the role policy a packet was assembled under, stored
// with its request (Request.RolePolicy): its effective members and their
// layers, and what the request said for itself. A replay assembles with
// it, whatever the policy has become since.
type AppliedPolicy struct {
	EffectivePolicy
	// Request lists the members the request gave itself, which won over
	// the policy's.
	Request []string `json:"request,omitempty"`
	// RequestedBudget is the request's own token_budget when the policy's
	// max capped it (0: it did not).
	RequestedBudget int `json:"requested_token_budget,omitempty"`
}

// ApplyPolicy gives a normalized request the members it did not send from
// its role's effective policy, caps its token_budget at a max policy's,
// and keeps the policy with the request. A role without a policy leaves
// the request as it was, so its packets are what they were before
// policies existed.
//
// kinds and max_per_section given in the request win over the policy's as
// the other members do (the layer that set them is then "request"), with
// a policy or without one.
func (r *Request) ApplyPolicy(e EffectivePolicy) {
	if e.Empty() && len(r.Kinds) == 0 && len(r.MaxPerSection) == 0 {
		return
	}
	if e.Layers == nil {
		e.Layers = map[string]string{}
	}
	e.Role = r.TargetRole
	a := &AppliedPolicy{EffectivePolicy: e}
	if len(r.Kinds) > 0 {
		a.Kinds, a.Layers[MemberKinds] = slices.Clone(r.Kinds), LayerRequest
		a.Request = append(a.Request, MemberKinds)
	}
	if len(r.MaxPerSection) > 0 {
		a.MaxPerSection, a.Layers[MemberMaxPerSection] = maps.Clone(r.MaxPerSection), LayerRequest
		a.Request = append(a.Request, MemberMaxPerSection)
	}
	if b := e.TokenBudget; b != nil {
		switch {
		case !r.budgetGiven:
			r.TokenBudget = *b
		case e.Max && r.TokenBudget > *b:
			a.RequestedBudget, r.TokenBudget = r.TokenBudget, *b
		default:
			a.Request = append(a.Request, MemberTokenBudget)
		}
	}
	if e.Format != "" {
		if r.formatGiven {
			a.Request = append(a.Request, MemberFormat)
		} else {
			r.Format = e.Format
		}
	}
	if e.Tokenizer != "" {
		if r.tokenizerGiven {
			a.Request = append(a.Request, MemberTokenizer)
		} else {
			r.Tokenizer = e.Tokenizer
		}
	}
	r.RolePolicy = a
}

// AllowsKind reports whether the policy lets items of kind into a packet
// (a nil policy, or one without kinds, lets every kind in).
func (a *AppliedPolicy) AllowsKind(kind string) bool {
	return a == nil || len(a.Kinds) == 0 || slices.Contains(a.Kinds, kind)
}

// SectionCap is the most entries the policy lets section hold, and
// whether it bounds it at all.
func (a *AppliedPolicy) SectionCap(section string) (int, bool) {
	if a == nil {
		return 0, false
	}
	n, ok := a.MaxPerSection[section]
	return n, ok
}

// KindDetail is the detail of a record of an item the policy's kinds left
// out: the role, the kinds and the layer that set them.
func (a *AppliedPolicy) KindDetail(kind string) string {
	return fmt.Sprintf("kind %q is not among role %q's kinds [%s] (role policy of %s)",
		kind, a.Role, strings.Join(a.Kinds, " "), a.Layers[MemberKinds])
}

// SectionDetail is the detail of a record of an item the policy's
// max_per_section left out.
func (a *AppliedPolicy) SectionDetail(section string, n int) string {
	return fmt.Sprintf("section %q held %d entries, the most role %q's max_per_section allows (role policy of %s)",
		section, n, a.Role, a.Layers[MemberMaxPerSection])
}
