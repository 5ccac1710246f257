package item

import (
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/ctxtype"
)

// KindCeiling is the highest authority an item of a kind gets by default.
// An instruction, a recorded decision and a skill (how to do a job) tell
// the agent what to do, and default to instruction; every other kind
// describes the world (knowledge, state, an episode, evidence, a tool) and
// defaults to evidence. No kind defaults to policy: the rules of the
// deployment are claimed, never assumed. The kind shapes only the default;
// an authority the write names is checked against the source's ceiling and
// the writer's grant alone (auth.CheckAuthority).
func KindCeiling(kind string) string {
	switch kind {
	case "instruction", "decision", "skill":
		return auth.Instruction
	}
	return auth.Evidence
}

// DefaultAuthority is an item's authority when its write names none: the
// highest its kind (KindCeiling), its source (auth.SourceCeiling) and its
// writer's grant (max_authority) all allow. docs/authority.md is this rule
// as a table, tested row by row.
func DefaultAuthority(kind, source, grant string) string {
	return auth.Capped(auth.Capped(KindCeiling(kind), auth.SourceCeiling(source)), grant)
}

// defaultAuthority gives each write that named no authority its default for
// its writer: normalize leaves it empty, as it cannot know the writer.
func defaultAuthority(agent *auth.Agent, fs ...*ctxtype.Fields) {
	for _, f := range fs {
		if f.Authority == "" {
			f.Authority = DefaultAuthority(f.Kind, f.Source, agent.Ceiling())
		}
	}
}
