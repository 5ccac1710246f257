package evidence

import (
	"context"
	"strconv"
	"strings"

	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/store"
)

// Proposals and their decisions (migration 00036) are append-only rows of
// the project's chain: each entry is checked against its row as it is
// now, and every row must have its entry.

// proposalBodies adds to out the bodies of the proposal and decision rows
// a page of entries covers, recomputed from the rows, by kind and
// subject.
func proposalBodies(ctx context.Context, tx *store.Tx, proj string, es []audit.Entry, out map[string]map[string][]byte) error {
	var props, decs []store.ProposalRef
	for _, e := range es {
		ref, ok := proposalRef(e.Subject)
		if !ok {
			continue
		}
		if e.Kind == audit.KindProposal {
			props = append(props, ref)
		} else {
			decs = append(decs, ref)
		}
	}
	var err error
	if out[audit.KindProposal], err = tx.ProposalBodies(ctx, proj, props); err != nil {
		return err
	}
	out[audit.KindProposalDecision], err = tx.ProposalDecisionBodies(ctx, proj, decs)
	return err
}

// proposalRef is the key and number a proposal's subject names.
func proposalRef(subject string) (store.ProposalRef, bool) {
	i := strings.LastIndexByte(subject, '#')
	if i < 0 {
		return store.ProposalRef{}, false
	}
	n, err := strconv.Atoi(subject[i+1:])
	return store.ProposalRef{Key: subject[:i], Number: n}, err == nil
}

func coveredProposals(ctx context.Context, tx *store.Tx, proj string, v *audit.Verifier) (bool, error) {
	return coveredRefs(ctx, tx, proj, v, audit.KindProposal, false)
}

func coveredDecisions(ctx context.Context, tx *store.Tx, proj string, v *audit.Verifier) (bool, error) {
	return coveredRefs(ctx, tx, proj, v, audit.KindProposalDecision, true)
}

// coveredRefs checks that every proposal (or, with decided, every
// decision) of the project has its entry.
func coveredRefs(ctx context.Context, tx *store.Tx, proj string, v *audit.Verifier, kind string, decided bool) (bool, error) {
	for after := (store.ProposalRef{}); ; {
		page, err := tx.ProposalRefs(ctx, proj, after, verifyPage, decided)
		if err != nil {
			return false, err
		}
		for _, r := range page {
			if !v.Covered(kind, audit.ProposalSubject(r.Key, r.Number)) {
				return false, nil
			}
		}
		if len(page) < verifyPage {
			return true, nil
		}
		after = page[len(page)-1]
	}
}
