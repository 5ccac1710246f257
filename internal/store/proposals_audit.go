package store

import (
	"context"

	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/store/internal/dbsqlc"
)

// ProposalRef names a proposal (and its decision) of a project's item.
type ProposalRef struct {
	Key    string
	Number int
}

// ProposalRefs is a page of a project's proposals after after, in (key,
// number) order, for the audit's check that every proposal has its
// entry; decisions, with decided, for its check of the decisions.
func (db DB) ProposalRefs(ctx context.Context, project string, after ProposalRef, limit int, decided bool) ([]ProposalRef, error) {
	var out []ProposalRef
	if decided {
		rows, err := q.ProposalDecisionNumbers(ctx, db.ex, dbsqlc.ProposalDecisionNumbersParams{Project: project,
			AfterKey: after.Key, AfterProposal: int32(after.Number), Lim: int32(limit)})
		if err != nil {
			return nil, interpret(err)
		}
		for _, r := range rows {
			out = append(out, ProposalRef{Key: r.Key, Number: int(r.Proposal)})
		}
		return out, nil
	}
	rows, err := q.ProposalNumbers(ctx, db.ex, dbsqlc.ProposalNumbersParams{Project: project,
		AfterKey: after.Key, AfterProposal: int32(after.Number), Lim: int32(limit)})
	if err != nil {
		return nil, interpret(err)
	}
	for _, r := range rows {
		out = append(out, ProposalRef{Key: r.Key, Number: int(r.Proposal)})
	}
	return out, nil
}

// ProposalBodies recomputes the entry bodies of proposals from their
// rows, by subject (audit.ProposalSubject).
func (db DB) ProposalBodies(ctx context.Context, project string, refs []ProposalRef) (map[string][]byte, error) {
	out := map[string][]byte{}
	if len(refs) == 0 {
		return out, nil
	}
	keys, nums := refArrays(refs)
	rows, err := q.ProposalGetMany(ctx, db.ex, dbsqlc.ProposalGetManyParams{Project: project, Keys: keys, Proposals: nums})
	if err != nil {
		return nil, interpret(err)
	}
	for _, r := range rows {
		out[audit.ProposalSubject(r.Key, int(r.Proposal))] = bodyOrMark(audit.ProposalBody(proposalRow(r)))
	}
	return out, nil
}

// ProposalDecisionBodies recomputes the entry bodies of decisions from
// their rows, by subject.
func (db DB) ProposalDecisionBodies(ctx context.Context, project string, refs []ProposalRef) (map[string][]byte, error) {
	out := map[string][]byte{}
	if len(refs) == 0 {
		return out, nil
	}
	keys, nums := refArrays(refs)
	rows, err := q.ProposalDecisionsOf(ctx, db.ex, dbsqlc.ProposalDecisionsOfParams{Project: project, Keys: keys, Proposals: nums})
	if err != nil {
		return nil, interpret(err)
	}
	for _, r := range rows {
		out[audit.ProposalSubject(r.Key, int(r.Proposal))] = bodyOrMark(audit.ProposalDecisionBody(decisionRow(r)))
	}
	return out, nil
}

func refArrays(refs []ProposalRef) ([]string, []int32) {
	keys, nums := make([]string, len(refs)), make([]int32, len(refs))
	for i, r := range refs {
		keys[i], nums[i] = r.Key, int32(r.Number)
	}
	return keys, nums
}
