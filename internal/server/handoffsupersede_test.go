package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
)

// TestHandoffSupersedeOnlyByRight: a create supersedes the pending handoff
// of its task and target role only for those who may withdraw it (its
// source agent, an admin of the project); anyone else's create is a 409
// conflict naming it, on contextd's body and on KXM's manifest alike, and
// writes nothing.
func TestHandoffSupersedeOnlyByRight(t *testing.T) {
	t.Parallel()
	e, a := handoffWorld(t)
	first := e.handoff(a.implementer, manifest("T-1", "critic"))
	count := func() int {
		return len(e.do("GET", "/v1/projects/acme/handoffs?task_id=T-1", a.critic, nil).list())
	}

	// Another edit agent, of another role and of the source's own.
	r := e.do("POST", "/v1/projects/acme/handoffs", a.planner, manifest("T-1", "critic"))
	require.Equal(t, 409, r.status, r.text)
	require.Equal(t, "conflict", r.json["code"])
	require.Contains(t, r.json["detail"], first)
	require.Contains(t, r.json["detail"], "T-1")
	require.Contains(t, r.json["detail"], "critic")
	twinID, twin := e.agentWithID("implementer", auth.Edit, "acme")
	r = e.do("POST", "/v1/projects/acme/handoffs", twin, kxmManifest(t, twinID, "T-1"))
	require.Equal(t, 409, r.status, r.text)
	require.Equal(t, "conflict", r.json["code"])
	require.Contains(t, r.json["detail"], first)
	d := e.do("GET", "/v1/projects/acme/handoffs/"+first, a.critic, nil)
	require.Equal(t, "pending", d.json["status"])
	require.Len(t, d.json["events"], 1)
	require.Equal(t, 1, count(), "no handoff stored by a refused create")

	// Another target role is another handoff.
	e.handoff(a.planner, manifest("T-1", "verifier"))
	require.Equal(t, "pending", e.do("GET", "/v1/projects/acme/handoffs/"+first, a.critic, nil).json["status"])

	// The source supersedes its own; an admin of the project anyone's.
	second := e.handoff(a.implementer, manifest("T-1", "critic"))
	d = e.do("GET", "/v1/projects/acme/handoffs/"+first, a.critic, nil)
	require.Equal(t, "superseded", d.json["status"])
	require.Equal(t, second, d.json["superseded_by"])
	third := e.handoff(e.admin, manifest("T-1", "critic"))
	d = e.do("GET", "/v1/projects/acme/handoffs/"+second, a.critic, nil)
	require.Equal(t, "superseded", d.json["status"])
	require.Equal(t, third, d.json["superseded_by"])
}
