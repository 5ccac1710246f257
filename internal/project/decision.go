package project

import (
	"context"

	"github.com/contextd/contextd/internal/auth"
)

// decision is what a request's one authorization decided: agent may act on
// project with permission perm. The HTTP server decides once, before the
// handler (from the contract's x-contextd-permission); the services it
// calls then ask Authorize again for their own need, and trust the decision
// when it covers that need instead of deciding a second time. Callers that
// decide nothing (MCP, the explorer) are authorized by the services
// themselves, as before.
type decision struct {
	agent   *auth.Agent
	project string
	perm    auth.Permission
}

type decisionKey struct{}

// AuthorizeRequest is Authorize for the request's one decision: ctx, when
// the agent may, carries what was decided for the services to trust.
func (s *Service) AuthorizeRequest(ctx context.Context, agent *auth.Agent, project string, p auth.Permission) (context.Context, error) {
	if err := s.Authorize(ctx, agent, project, p); err != nil {
		return ctx, err
	}
	return context.WithValue(ctx, decisionKey{}, decision{agent: agent, project: project, perm: p}), nil
}

// decided reports whether ctx carries a decision that covers agent acting
// on project with p: the same agent (the same value, not only its id: an
// agent reloaded after a change is decided again), the same project, and
// a permission at least p.
func decided(ctx context.Context, agent *auth.Agent, project string, p auth.Permission) bool {
	d, ok := ctx.Value(decisionKey{}).(decision)
	return ok && d.agent == agent && d.project == project && p.Valid() && !p.Exceeds(d.perm)
}
