package evidence

import (
	"context"

	"github.com/contextd/contextd/internal/audit"
	"github.com/contextd/contextd/internal/store"
)

// currentRolePolicies checks every role policy row of the project against
// the last entry of its role (a policy is a mutable row, like the
// project's), and that no role the chain has a policy entry for lacks its
// row.
func currentRolePolicies(ctx context.Context, tx *store.Tx, proj string, v *audit.Verifier) (bool, error) {
	seen := map[string]bool{}
	for after := ""; ; {
		page, err := tx.RolePolicyBodies(ctx, proj, after, verifyPage)
		if err != nil {
			return false, err
		}
		for _, p := range page {
			seen[p.Subject] = true
			if !v.Current(audit.KindRolePolicy, p.Subject, p.Body) {
				return false, nil
			}
		}
		if len(page) < verifyPage {
			return v.MissingCurrent(audit.KindRolePolicy, seen), nil
		}
		after = page[len(page)-1].Subject
	}
}
