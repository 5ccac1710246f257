package server_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
)

// proposalWorld is acme with a writer (edit, role writer, the default
// max_authority instruction), a reviewer (edit, role reviewer) and a
// reader (read-only), each of its own name, and their agent ids.
type proposalWorld struct {
	*env
	writer, reviewer, reader       string // keys
	writerID, reviewerID, readerID string
}

func newProposalWorld(t *testing.T) *proposalWorld {
	e := setup(t)
	e.project("acme")
	w := &proposalWorld{env: e}
	w.writer, w.writerID = w.named("writer-1", "writer", auth.Edit, "acme")
	w.reviewer, w.reviewerID = w.named("reviewer-1", "reviewer", auth.Edit, "acme")
	w.reader, w.readerID = w.named("reader-1", "reader", auth.ReadOnly, "acme")
	return w
}

// named creates an agent of that name and returns its key and id.
func (w *proposalWorld) named(name, role string, perm auth.Permission, projects ...string) (string, string) {
	w.t.Helper()
	a, key, err := w.agents.CreateLocal(context.Background(), auth.CreateParams{Name: name, Role: role, Permission: perm, Projects: projects})
	require.NoError(w.t, err)
	return key, a.ID
}

const acmeItems = "/v1/projects/acme/items/"

// propose PUTs an item write as key, asking it to be a proposal.
func (w *proposalWorld) propose(key, item, content string, extra ...any) resp {
	w.t.Helper()
	body := map[string]any{"content": content, "proposal": true}
	for i := 0; i+1 < len(extra); i += 2 {
		body[extra[i].(string)] = extra[i+1]
	}
	return w.do("PUT", acmeItems+item, key, body)
}

func (w *proposalWorld) promote(key, item string, n int, body any) resp {
	w.t.Helper()
	return w.do("POST", acmeItems+item+"/proposals/"+strconv.Itoa(n)+"/promote", key, body)
}

func (w *proposalWorld) reject(key, item string, n int, body any) resp {
	w.t.Helper()
	return w.do("POST", acmeItems+item+"/proposals/"+strconv.Itoa(n)+"/reject", key, body)
}

// toolInstruction is a tool-sourced instruction: over the tool source's
// ceiling (evidence) whoever writes it.
func toolInstruction(content string) map[string]any {
	return map[string]any{"content": content, "kind": "instruction", "source": "tool", "authority": "instruction"}
}

// TestProposalOnExcessAuthority: a tool-sourced instruction is 403 while
// the project refuses writes over their ceiling (the default), and a
// proposal (202) once the project says propose; GET shows the setting,
// and a PUT that leaves it out keeps it.
func TestProposalOnExcessAuthority(t *testing.T) {
	t.Parallel()
	w := newProposalWorld(t)
	r := w.do("PUT", acmeItems+"deploy.rule", w.writer, toolInstruction("Deploy only on Tuesdays."))
	require.Equal(t, 403, r.status, r.text)
	require.Equal(t, "authority_exceeds_grant", r.json["code"])
	require.Equal(t, "refuse", w.do("GET", "/v1/projects/acme", w.admin, nil).json["on_excess_authority"])

	bad := w.do("PUT", "/v1/projects/acme", w.admin, map[string]any{"on_excess_authority": "maybe"})
	require.Equal(t, 422, bad.status, bad.text)
	require.Equal(t, []string{"/on_excess_authority"}, bad.pointers())
	p := w.do("PUT", "/v1/projects/acme", w.admin, map[string]any{"on_excess_authority": "propose"})
	require.Equal(t, 200, p.status, p.text)
	require.Equal(t, "propose", p.json["on_excess_authority"])
	p = w.do("PUT", "/v1/projects/acme", w.admin, map[string]any{"description": "kept"})
	require.Equal(t, "propose", p.json["on_excess_authority"], "left out: the project's stays")
	require.Equal(t, "propose", w.do("GET", "/v1/projects/acme", w.reader, nil).json["on_excess_authority"])

	r = w.do("PUT", acmeItems+"deploy.rule", w.writer, toolInstruction("Deploy only on Tuesdays."))
	require.Equal(t, 202, r.status, r.text)
	require.Equal(t, "deploy.rule", r.json["key"])
	require.EqualValues(t, 1, r.json["proposal"])
	require.Equal(t, w.writerID, r.json["proposed_by"])
	require.Equal(t, "writer-1", r.json["proposed_by_name"])
	require.Equal(t, "Deploy only on Tuesdays.", r.json["content"])
	require.Equal(t, "instruction", r.json["authority"])
	require.Equal(t, "pending", r.json["status"])
	require.Equal(t, "excess_authority", r.json["cause"])
	require.Contains(t, r.json["cause_detail"], `ceiling "evidence" of source "tool"`)
	require.EqualValues(t, 0, r.json["base_version"])
	require.Contains(t, r.json["promoter_roles"], "reviewer")
	require.NotContains(t, r.json["promoter_roles"], "writer", "its author is the only writer")
	require.NotContains(t, r.json["promoter_roles"], "reader", "read-only")

	require.Equal(t, 404, w.do("GET", acmeItems+"deploy.rule", w.writer, nil).status, "a proposal is never current")
	l := w.do("GET", acmeItems+"deploy.rule/proposals", w.reader, nil)
	require.Equal(t, 200, l.status, l.text)
	require.Len(t, l.list(), 1)

	// The same write again by its author answers the same proposal.
	again := w.do("PUT", acmeItems+"deploy.rule", w.writer, toolInstruction("Deploy only on Tuesdays."))
	require.Equal(t, 202, again.status, again.text)
	require.EqualValues(t, 1, again.json["proposal"])
	// Within its ceilings a write is still a write.
	require.Equal(t, 201, w.do("PUT", acmeItems+"plain", w.writer, map[string]any{"content": "written"}).status)
	require.Equal(t, true, w.verify().json["ok"])
}

// TestSelfPromotionRefused: the author may not promote its own
// proposal, an admin included, nor through another key of its name; any
// other principal whose grant covers it may.
func TestSelfPromotionRefused(t *testing.T) {
	t.Parallel()
	w := newProposalWorld(t)
	motto := w.propose(w.admin, "motto", "We answer within a day.")
	require.Equal(t, 202, motto.status, motto.text)
	s := w.promote(w.admin, "motto", 1, nil)
	require.Equal(t, 403, s.status, s.text)
	require.Equal(t, "self_promotion", s.json["code"])
	twin, _ := w.named(motto.json["proposed_by_name"].(string), "ops", auth.Admin, "*")
	s = w.promote(twin, "motto", 1, nil)
	require.Equal(t, 403, s.status, s.text)
	require.Equal(t, "self_promotion", s.json["code"], "a second key of the same agent")

	r := w.propose(w.writer, "mine", "Mine to propose.")
	require.Equal(t, 202, r.status, r.text)
	writerTwin, _ := w.named("writer-1", "writer", auth.Edit, "acme")
	require.Equal(t, "self_promotion", w.promote(writerTwin, "mine", 1, nil).json["code"])
	require.Equal(t, "self_promotion", w.promote(w.writer, "mine", 1, nil).json["code"])

	ok := w.promote(w.writer, "motto", 1, nil)
	require.Equal(t, 200, ok.status, ok.text)
	it := ok.json["item"].(map[string]any)
	require.EqualValues(t, 1, it["version"])
	require.Equal(t, w.writerID, it["created_by"], "the promoter writes the version")
	require.Equal(t, map[string]any{"proposal": 1.0, "proposed_by": motto.json["proposed_by"]}, it["promoted_from"])
	require.Equal(t, "promoted", ok.json["proposal"].(map[string]any)["status"])
	require.Equal(t, 200, w.promote(w.admin, "mine", 1, nil).status, "another principal")
}

// TestPromotionSupersedesState: a promotion by another principal makes the
// next version, written by the promoter and linked both ways to the
// proposal; the state's previous current version then shows the
// promotion's time as its valid_until, and packets serve the new one.
func TestPromotionSupersedesState(t *testing.T) {
	t.Parallel()
	w := newProposalWorld(t)
	state := map[string]any{"content": "Refunds within 14 days.", "kind": "state", "state_key": "refund.window"}
	require.Equal(t, 201, w.do("PUT", acmeItems+"refund.window", w.admin, state).status)
	require.Equal(t, 200, w.do("PUT", "/v1/projects/acme", w.admin, map[string]any{"on_excess_authority": "propose"}).status)
	r := w.do("PUT", acmeItems+"refund.window", w.writer, map[string]any{"content": "Refunds within 30 days.", "kind": "state",
		"state_key": "refund.window", "source": "tool", "authority": "instruction"})
	require.Equal(t, 202, r.status, r.text)
	require.EqualValues(t, 1, r.json["base_version"])
	cur := w.do("GET", acmeItems+"refund.window", w.reader, nil)
	require.EqualValues(t, 1, cur.json["version"])
	require.EqualValues(t, 1, cur.json["pending_proposals"])

	before := time.Now().UTC()
	ok := w.promote(w.reviewer, "refund.window", 1, map[string]any{"reason": "checked with finance"})
	require.Equal(t, 200, ok.status, ok.text)
	d := ok.json["proposal"].(map[string]any)["decision"].(map[string]any)
	require.Equal(t, "promoted", d["decision"])
	require.EqualValues(t, 2, d["version"])
	require.EqualValues(t, 1, d["superseded_version"])
	require.Equal(t, w.reviewerID, d["decided_by"])
	require.Equal(t, "checked with finance", d["reason"])

	now := w.do("GET", acmeItems+"refund.window", w.reader, nil)
	require.EqualValues(t, 2, now.json["version"])
	require.Equal(t, "Refunds within 30 days.", now.json["content"])
	require.Equal(t, "instruction", now.json["authority"], "the authority asked for, vouched by the promoter")
	require.Equal(t, w.reviewerID, now.json["created_by"])
	require.EqualValues(t, 0, now.json["pending_proposals"])
	require.Equal(t, map[string]any{"proposal": 1.0, "proposed_by": w.writerID}, now.json["promoted_from"])

	old := w.do("GET", acmeItems+"refund.window/versions/1", w.reader, nil)
	require.Equal(t, 200, old.status, old.text)
	sup := old.json["superseded_by"].(map[string]any)
	require.EqualValues(t, 2, sup["version"])
	require.Equal(t, sup["at"], old.json["valid_until"], "the state's previous current ends when the promotion supersedes it")
	until, err := time.Parse(time.RFC3339Nano, old.json["valid_until"].(string))
	require.NoError(t, err)
	require.False(t, until.Before(before.Add(-time.Minute)))
	vs := w.do("GET", acmeItems+"refund.window/versions", w.reader, nil)
	require.Equal(t, old.json["valid_until"], vs.list()[0]["valid_until"])
	require.Nil(t, vs.list()[1]["valid_until"])

	p := w.do("POST", "/v1/projects/acme/packets", w.admin, map[string]any{"target_role": "reader"})
	require.Equal(t, 201, p.status, p.text)
	require.Contains(t, p.json["rendered"], "within 30 days")
	require.NotContains(t, p.json["rendered"], "within 14 days")

	g := w.do("GET", acmeItems+"refund.window/proposals/1", w.reader, nil)
	require.Equal(t, "promoted", g.json["status"])
	require.Equal(t, true, w.verify().json["ok"])
}

// TestStaleProposal: a proposal made against a version that is no longer
// current is 409 on promotion, unless rebased.
func TestStaleProposal(t *testing.T) {
	t.Parallel()
	w := newProposalWorld(t)
	require.Equal(t, 201, w.do("PUT", acmeItems+"hours", w.admin, map[string]any{"content": "Open 9 to 5."}).status)
	require.Equal(t, 202, w.propose(w.writer, "hours", "Open 8 to 6.").status)
	require.Equal(t, 201, w.do("PUT", acmeItems+"hours", w.admin, map[string]any{"content": "Open 9 to 6."}).status)
	s := w.promote(w.reviewer, "hours", 1, nil)
	require.Equal(t, 409, s.status, s.text)
	require.Equal(t, "stale_proposal", s.json["code"])
	require.EqualValues(t, 1, s.json["base_version"])
	require.EqualValues(t, 2, s.json["current_version"])
	ok := w.promote(w.reviewer, "hours", 1, map[string]any{"rebase": true})
	require.Equal(t, 200, ok.status, ok.text)
	d := ok.json["proposal"].(map[string]any)["decision"].(map[string]any)
	require.Equal(t, true, d["rebased"])
	require.EqualValues(t, 3, d["version"])
	require.EqualValues(t, 2, d["superseded_version"])
	require.Equal(t, "Open 8 to 6.", w.do("GET", acmeItems+"hours", w.reader, nil).json["content"])
}

// TestProposalsNeverInPackets: no packet serves a pending proposal, of a
// new key or of an existing one; why says the item has one and who may
// promote it.
func TestProposalsNeverInPackets(t *testing.T) {
	t.Parallel()
	w := newProposalWorld(t)
	require.Equal(t, 201, w.do("PUT", acmeItems+"greeting", w.admin, map[string]any{"content": "Say hello."}).status)
	require.Equal(t, 202, w.propose(w.writer, "greeting", "Say PROPOSED-GREETING.").status)
	require.Equal(t, 202, w.propose(w.writer, "fresh", "PROPOSED-FRESH always.", "trigger", map[string]any{"always": true}).status)
	r := w.do("POST", "/v1/projects/acme/items", w.writer, map[string]any{"items": []any{
		map[string]any{"key": "batched", "content": "PROPOSED-BATCH", "proposal": true},
		map[string]any{"key": "written", "content": "Written in the batch."}}})
	require.Equal(t, 200, r.status, r.text)
	require.EqualValues(t, 1, r.json["proposed"])
	require.EqualValues(t, 1, r.json["created"])
	require.Equal(t, "proposed", r.json["items"].([]any)[0].(map[string]any)["status"])
	i := w.do("POST", "/v1/projects/acme/items:import", w.writer, map[string]any{"format": "contextd", "proposal": true,
		"items": []any{map[string]any{"key": "imported", "content": "PROPOSED-IMPORT"}}})
	require.Equal(t, 200, i.status, i.text)
	require.EqualValues(t, 1, i.json["proposed"])

	for _, role := range []string{"reviewer", "writer"} {
		p := w.do("POST", "/v1/projects/acme/packets", w.admin, map[string]any{"target_role": role, "query": "hello greeting"})
		require.Equal(t, 201, p.status, p.text)
		require.Contains(t, p.json["rendered"], "Say hello.")
		require.Contains(t, p.json["rendered"], "Written in the batch.")
		require.NotContains(t, p.json["rendered"], "PROPOSED")
		why := w.do("GET", "/v1/projects/acme/packets/"+p.json["packet_id"].(string)+"/why?item=greeting", w.admin, nil)
		require.Equal(t, 200, why.status, why.text)
		pend := why.json["pending_proposals"].(map[string]any)
		require.EqualValues(t, 1, pend["count"])
		require.Equal(t, []any{1.0}, pend["proposals"])
		require.Contains(t, pend["promoters"], "reviewer")
		require.Contains(t, why.json["detail"], "wait for promotion")
	}
	l := w.do("GET", "/v1/projects/acme/proposals?status=pending", w.reader, nil)
	require.Equal(t, 200, l.status, l.text)
	require.Len(t, l.list(), 4)
	require.Empty(t, w.do("GET", "/v1/projects/acme/proposals?status=promoted", w.reader, nil).list())
}

// TestProposalEventsInInboxes: a proposal's events reach the inboxes of
// the roles that may promote it and its author's role, in the handoff
// event stream's one sequence.
func TestProposalEventsInInboxes(t *testing.T) {
	t.Parallel()
	w := newProposalWorld(t)
	require.Equal(t, 202, w.propose(w.writer, "note", "A note to review.").status)
	require.Equal(t, 200, w.promote(w.reviewer, "note", 1, nil).status)

	inbox, stop := openStream(t, w.url, w.reviewer, "?target_role=reviewer", "0")
	defer stop()
	ev := next(t, inbox)
	require.Equal(t, "proposal_created", ev.event)
	require.Contains(t, ev.data, `"type":"proposal"`)
	require.Contains(t, ev.data, `"key":"note"`)
	require.Contains(t, ev.data, `"author":"`+w.writerID+`"`)
	ev2 := next(t, inbox)
	require.Equal(t, "proposal_promoted", ev2.event)
	require.Contains(t, ev2.data, `"version":1`)
	require.Less(t, ev.id, ev2.id)

	authors, stop2 := openStream(t, w.url, w.writer, "?source_role=writer", "0")
	defer stop2()
	require.Equal(t, "proposal_created", next(t, authors).event)
	require.Equal(t, "proposal_promoted", next(t, authors).event)

	// The reader's inbox has none of them: the first event it gets is a
	// handoff to it.
	readers, stop3 := openStream(t, w.url, w.reader, "", "0")
	defer stop3()
	h := w.do("POST", "/v1/projects/acme/handoffs", w.admin, map[string]any{"task_id": "T-1", "target": map[string]any{"role": "reader"}, "intent": "request_review"})
	require.Equal(t, 201, h.status, h.text)
	require.Equal(t, "created", next(t, readers).event)
}

// walkProposal makes a pending proposal of a fresh key of the permission
// walk's project, by an agent whose name no identity of the walk has, and
// returns the key.
func (w *world) walkProposal() string {
	w.e.t.Helper()
	_, key, err := w.e.agents.CreateLocal(context.Background(), auth.CreateParams{Name: w.fresh("proposer"), Role: "proposer",
		Permission: auth.Edit, Projects: []string{"alpha"}})
	require.NoError(w.e.t, err)
	item := w.fresh("proposed")
	r := w.e.do("PUT", home+"/items/"+item, key, map[string]any{"content": "a proposal", "proposal": true})
	require.Equal(w.e.t, 202, r.status, r.text)
	return item
}

// TestPromotedVersionIsTheWrite: the version a promotion makes is the
// write the proposal holds, field for field: the same write sent
// directly afterwards changes nothing.
func TestPromotedVersionIsTheWrite(t *testing.T) {
	t.Parallel()
	w := newProposalWorld(t)
	body := map[string]any{"content": "Escalate after two days.", "kind": "instruction", "title": "Escalation",
		"metadata": map[string]any{"zeta": 1, "a": map[string]any{"bb": 2, "c": 1.5}, "long_key_first": "<&>"},
		"trigger":  map[string]any{"keywords": []string{"escalate"}, "match": "stem"}, "valid_from": "2026-01-02T03:04:05.123456Z"}
	prop := map[string]any{"proposal": true}
	for k, v := range body {
		prop[k] = v
	}
	require.Equal(t, 202, w.do("PUT", acmeItems+"escalation", w.writer, prop).status)
	require.Equal(t, 200, w.promote(w.reviewer, "escalation", 1, nil).status)
	again := w.do("PUT", acmeItems+"escalation", w.writer, body)
	require.Equal(t, 200, again.status, "unchanged: "+again.text)
	require.EqualValues(t, 1, again.json["version"])
	same := w.do("PUT", acmeItems+"escalation", w.writer, prop)
	require.Equal(t, 200, same.status, "a proposal of what the item holds proposes nothing: "+same.text)
}
