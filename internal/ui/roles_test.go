package ui_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestProjectPageShowsRolePolicies: the project page lists the role
// policies its packets are made with, each member with the layer that set
// it, to whoever may read the project.
func TestProjectPageShowsRolePolicies(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.seed()
	b := e.browser()
	e.signIn(b, w.planner)
	_, _, body := e.page(b, "/ui/projects/acme")
	require.Contains(t, body, "No role policy")

	e.must(200, "PUT", "/v1/projects/_shared/roles/planner", e.admin, map[string]any{"token_budget": 12000, "max": true})
	e.must(200, "PUT", "/v1/projects/acme/roles/planner", e.admin, map[string]any{"kinds": []string{"knowledge", "state"},
		"max_per_section": map[string]any{"Project Knowledge": 5}})
	status, _, body := e.page(b, "/ui/projects/acme")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `data-role="planner"`)
	require.Contains(t, body, "token_budget 12000 (max)")
	require.Contains(t, body, "Project Knowledge ≤ 5")
	require.Contains(t, body, "token_budget from _shared; kinds from acme; max_per_section from acme")
}
