package server_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/item"
)

// TestProposalDecisionsBounds: a proposal that does not exist, or that
// the caller may not see, is 404; one decided already is 409 with its
// state; a rejection needs a reason (422); its author may take it back;
// a promoter whose grant does not cover it is 403.
func TestProposalDecisionsBounds(t *testing.T) {
	t.Parallel()
	w := newProposalWorld(t)
	require.Equal(t, 202, w.propose(w.writer, "rule", "A rule.").status)
	require.Equal(t, 404, w.promote(w.reviewer, "rule", 2, nil).status, "no such number")
	require.Equal(t, 404, w.promote(w.reviewer, "nowhere", 1, nil).status, "no such key")
	require.Equal(t, 404, w.reject(w.reviewer, "rule", 9, map[string]any{"reason": "x"}).status)
	require.Equal(t, 404, w.do("GET", acmeItems+"rule/proposals/7", w.reader, nil).status)

	// A proposal on an item hidden from the writers does not exist for them.
	require.Equal(t, 201, w.do("PUT", acmeItems+"secret", w.admin, map[string]any{"content": "Reviewers only.",
		"roles": map[string]any{"visible_to": []string{"reviewer"}}}).status)
	require.Equal(t, 404, w.propose(w.writer, "secret", "Let writers see it.").status, "hidden: as if missing")
	require.Equal(t, 202, w.propose(w.reviewer, "secret", "Reviewers only, and soon.").status)
	otherWriter, _ := w.named("writer-2", "writer", auth.Edit, "acme")
	require.Equal(t, 404, w.promote(otherWriter, "secret", 1, nil).status, "a proposal it may not see")
	require.Equal(t, 404, w.do("GET", acmeItems+"secret/proposals", otherWriter, nil).status)
	require.Equal(t, 404, w.do("GET", acmeItems+"nothing/proposals", otherWriter, nil).status, "missing looks the same")
	require.Empty(t, w.do("GET", "/v1/projects/acme/proposals", otherWriter, nil).list()[1:], "only rule's")

	noReason := w.reject(w.reviewer, "rule", 1, map[string]any{})
	require.Equal(t, 422, noReason.status, noReason.text)
	require.Equal(t, []string{"/reason"}, noReason.pointers())
	require.Equal(t, 422, w.reject(w.reviewer, "rule", 1, map[string]any{"reason": "  "}).status)

	// A grant below the authority asked for does not promote it.
	low, _ := w.named("intern", "reviewer", auth.Edit, "acme")
	require.Equal(t, 200, w.do("PATCH", "/v1/agents/"+agentID(t, w, low), w.admin, map[string]any{"max_authority": "hypothesis"}).status)
	g := w.promote(low, "rule", 1, nil)
	require.Equal(t, 403, g.status, g.text)
	require.Equal(t, "authority_exceeds_grant", g.json["code"])

	ok := w.promote(w.reviewer, "rule", 1, nil)
	require.Equal(t, 200, ok.status, ok.text)
	again := w.promote(w.admin, "rule", 1, nil)
	require.Equal(t, 409, again.status, again.text)
	require.Equal(t, "invalid_transition", again.json["code"])
	require.Equal(t, "promoted", again.json["current_status"])
	r := w.reject(w.admin, "rule", 1, map[string]any{"reason": "too late"})
	require.Equal(t, 409, r.status)
	require.Equal(t, "promoted", r.json["current_status"])

	// Its author takes one back; then it is rejected for everyone.
	require.Equal(t, 202, w.propose(w.writer, "rule", "A better rule.").status)
	back := w.reject(w.writer, "rule", 2, map[string]any{"reason": "withdrawn by its author"})
	require.Equal(t, 200, back.status, back.text)
	require.Equal(t, "rejected", back.json["status"])
	require.Equal(t, "withdrawn by its author", back.json["decision"].(map[string]any)["reason"])
	p := w.promote(w.reviewer, "rule", 2, nil)
	require.Equal(t, 409, p.status)
	require.Equal(t, "rejected", p.json["current_status"])
	require.Len(t, w.do("GET", acmeItems+"rule/proposals?status=rejected", w.reader, nil).list(), 1)
	require.Equal(t, 422, w.do("GET", "/v1/projects/acme/proposals?status=maybe", w.reader, nil).status)
}

// agentID is the id of the agent of key, as the admin lists it.
func agentID(t *testing.T, w *proposalWorld, key string) string {
	t.Helper()
	a, err := w.agents.Authenticate(t.Context(), key)
	require.NoError(t, err)
	return a.ID
}

// TestProposalPendingLimit: an item takes at most item.MaxPending pending
// proposals; a decision makes room.
func TestProposalPendingLimit(t *testing.T) {
	t.Parallel()
	w := newProposalWorld(t)
	for i := range item.MaxPending {
		require.Equal(t, 202, w.propose(w.writer, "busy", fmt.Sprintf("Version %d.", i)).status)
	}
	r := w.propose(w.writer, "busy", "One too many.")
	require.Equal(t, 409, r.status, r.text)
	require.Equal(t, "too_many_proposals", r.json["code"])
	require.EqualValues(t, item.MaxPending, r.json["max_pending"])
	b := w.do("POST", "/v1/projects/acme/items", w.writer, map[string]any{"items": []any{
		map[string]any{"key": "busy", "content": "In a batch too.", "proposal": true}}})
	require.Equal(t, 409, b.status, b.text)
	require.Equal(t, 200, w.reject(w.reviewer, "busy", 3, map[string]any{"reason": "no"}).status)
	require.Equal(t, 202, w.propose(w.writer, "busy", "Now there is room.").status)
}

// TestProposalAttackers: a read-only agent cannot propose; a proposal is
// promoted only under its own project's path; an agent of another
// project does not learn it exists.
func TestProposalAttackers(t *testing.T) {
	t.Parallel()
	w := newProposalWorld(t)
	ro := w.propose(w.reader, "sneaky", "Read-only agents propose nothing.")
	require.Equal(t, 403, ro.status, ro.text)
	require.Equal(t, 403, w.do("POST", "/v1/projects/acme/items", w.reader, map[string]any{"items": []any{
		map[string]any{"key": "sneaky", "content": "x", "proposal": true}}}).status)
	require.Equal(t, 403, w.promote(w.reader, "sneaky", 1, nil).status, "promoting needs edit")

	w.project("beta")
	require.Equal(t, 202, w.propose(w.writer, "shared.path", "Proposed in acme.").status)
	both, _ := w.named("both", "reviewer", auth.Edit, "acme", "beta")
	require.Equal(t, 404, w.do("POST", "/v1/projects/beta/items/shared.path/proposals/1/promote", both, nil).status,
		"another project's item path")
	require.Equal(t, 404, w.do("POST", "/v1/projects/beta/items/shared.path/proposals/1/promote", w.admin, nil).status)
	betaOnly, _ := w.named("beta-reviewer", "reviewer", auth.Edit, "beta")
	require.Equal(t, 404, w.promote(betaOnly, "shared.path", 1, nil).status, "acme is out of its scope")
	require.Equal(t, 404, w.do("GET", "/v1/projects/acme/proposals", betaOnly, nil).status)
	require.Equal(t, 200, w.promote(both, "shared.path", 1, nil).status)
}

// TestProposalAudit: proposals, promotions and rejections are entries of
// the project's chain, and verify detects a proposal or a decision
// changed or removed behind the server's back.
func TestProposalAudit(t *testing.T) {
	t.Parallel()
	for name, sql := range map[string]string{
		"proposal changed":  `UPDATE item_proposals SET fields = jsonb_set(fields, '{content}', '"Forged."') WHERE key = 'a'`,
		"proposal removed":  `DELETE FROM item_proposals WHERE key = 'b'`,
		"decision changed":  `UPDATE item_proposal_decisions SET reason = 'forged' WHERE key = 'b'`,
		"decision removed":  `DELETE FROM item_proposal_decisions WHERE key = 'a'`,
		"proposal inserted": `INSERT INTO item_proposals SELECT project, key, 9, 9999, base_version, cause, cause_detail, fields, fields_sha256, promoter_roles, created_at, created_by, created_by_name, created_by_role FROM item_proposals WHERE key = 'a'`,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			w := newProposalWorld(t)
			require.Equal(t, 202, w.propose(w.writer, "a", "First.").status)
			require.Equal(t, 202, w.propose(w.writer, "b", "Second.").status)
			require.Equal(t, 200, w.promote(w.reviewer, "a", 1, nil).status)
			require.Equal(t, 200, w.reject(w.reviewer, "b", 1, map[string]any{"reason": "not now"}).status)
			r := w.verify()
			require.Equal(t, true, r.json["ok"], r.text)
			es := w.do("GET", "/v1/projects/acme/audit/entries", w.admin, nil)
			kinds := map[string]int{}
			for _, e := range es.list() {
				kinds[e["kind"].(string)]++
			}
			require.Equal(t, 2, kinds["proposal"], es.text)
			require.Equal(t, 2, kinds["proposal_decision"], es.text)
			w.tamper(sql)
			bad := w.verify()
			require.Equal(t, false, bad.json["ok"], bad.text)
			require.NotEmpty(t, bad.json["detail"])
		})
	}
}

// TestProposalsAppendOnly: the server's own tables refuse to change a
// proposal or a decision (the triggers; the login's grants are tested for
// every table by the role's tests).
func TestProposalsAppendOnly(t *testing.T) {
	t.Parallel()
	w := newProposalWorld(t)
	require.Equal(t, 202, w.propose(w.writer, "a", "First.").status)
	require.Equal(t, 200, w.reject(w.reviewer, "a", 1, map[string]any{"reason": "no"}).status)
	for _, sql := range []string{
		"UPDATE item_proposals SET cause = 'asked'", "DELETE FROM item_proposals", "TRUNCATE item_proposals CASCADE",
		"UPDATE item_proposal_decisions SET reason = 'x'", "DELETE FROM item_proposal_decisions", "TRUNCATE item_proposal_decisions",
	} {
		_, err := w.pool.Exec(t.Context(), sql)
		require.Error(t, err, sql)
	}
}

// TestProposalOverToolLimitIsRefused: a proposal stored before the
// trigger tool's limit (00041) with a longer tool is not promoted (422 at
// /trigger/tool, as a write of it is; it would overflow the item row's
// index entries: a 500), and nothing is written; it may still be
// rejected.
func TestProposalOverToolLimitIsRefused(t *testing.T) {
	t.Parallel()
	w := newProposalWorld(t)
	require.Equal(t, 202, w.propose(w.writer, "lookup", "Look it up.", "trigger", map[string]any{"tool": "lookup"}).status)
	// Stored before the limit: as the owner, past the append-only trigger.
	_, err := w.pool.Exec(t.Context(), `ALTER TABLE item_proposals DISABLE TRIGGER item_proposals_append_only;
		UPDATE item_proposals SET fields = jsonb_set(fields, '{trigger,tool}', to_jsonb(repeat('t', 3000)))
		WHERE project = 'acme' AND key = 'lookup';
		ALTER TABLE item_proposals ENABLE TRIGGER item_proposals_append_only`)
	require.NoError(t, err)
	r := w.promote(w.reviewer, "lookup", 1, nil)
	require.Equal(t, 422, r.status, r.text)
	require.Equal(t, "validation_failed", r.json["code"])
	require.Equal(t, []string{"/trigger/tool"}, r.pointers())
	require.Equal(t, 404, w.do("GET", acmeItems+"lookup", w.admin, nil).status, "nothing written")
	require.Equal(t, 200, w.reject(w.reviewer, "lookup", 1, map[string]any{"reason": "its tool is too long"}).status)
}
