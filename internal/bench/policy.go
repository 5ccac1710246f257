package bench

import (
	"context"
	"fmt"
	"net/http"
)

// policyKinds are every item kind: a bench policy leaves nothing out, so
// that a packet made under it does the work of one made without it, plus
// the policy's own (read with the snapshot, applied to each candidate).
var policyKinds = []string{"knowledge", "state", "episode", "skill", "decision", "instruction", "evidence", "tool"}

// policyCap is the bench policies' cap per section: more entries than a
// bench packet holds, so it binds nothing and is checked at every entry.
const policyCap = 1000

// setPolicies sets, with --role-policy, a policy for each of the bench's
// roles in each bench project (never in _shared, which every project
// reads): the packets' budget, every kind, a cap on Project Knowledge,
// markdown. The requests then name no token_budget (requestBudget).
// Without it, it takes away the policies an earlier run set there, so
// that a run with --reuse after one with --role-policy is one without.
func (r *runner) setPolicies(ctx context.Context) error {
	body := map[string]any{"token_budget": r.cfg.Budget, "kinds": policyKinds,
		"max_per_section": map[string]int{"Project Knowledge": policyCap}, "format": "markdown"}
	for _, p := range r.projects {
		for _, role := range Roles {
			path := "/v1/projects/" + p + "/roles/" + role
			if !r.cfg.RolePolicy {
				_, status, err := r.c.do(ctx, http.MethodDelete, path, r.cfg.AdminKey, nil)
				if err != nil && status != http.StatusNotFound {
					return fmt.Errorf("take the policy of role %s in %s away: %w", role, p, err)
				}
				continue
			}
			if err := r.c.call(ctx, http.MethodPut, path, r.cfg.AdminKey, body, nil); err != nil {
				return fmt.Errorf("set the policy of role %s in %s: %w", role, p, err)
			}
		}
	}
	if r.cfg.RolePolicy {
		r.logf("role policies: %d roles in %d projects", len(Roles), len(r.projects))
	}
	return nil
}

// requestBudget is the token_budget a packet request names: none under
// --role-policy (the role's policy gives it), else --budget.
func (r *runner) requestBudget() int {
	if r.cfg.RolePolicy {
		return 0
	}
	return r.cfg.Budget
}
