package server_test

// GET …/packets/{id}/suspects through the API: an item version that
// drives failures ranks first (correlational, the four counts exact), an
// ablation without it that succeeds makes it causal, an item hidden from
// a role never shows to it, changed since the task's last success, the
// counters against what records and outcomes say (a property test, with
// concurrent writers), and 404 for a packet the caller may not open.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
)

// suspectWorld is acme with an always-on item and pinned-only items, and
// a read-only support agent.
type suspectWorld struct {
	*env
	sup string
}

func newSuspectWorld(t *testing.T, pinned ...string) suspectWorld {
	t.Helper()
	e := setup(t)
	e.project("acme")
	items := []api.BatchItem{{Key: "always", Content: "Always answer politely and briefly."}}
	for _, k := range pinned {
		items = append(items, api.BatchItem{Key: k, Content: "The rule called " + k + " says something specific about refunds.",
			Trigger: &api.Trigger{PinnedOnly: ptr(true)}})
	}
	e.batch("acme", items)
	return suspectWorld{env: e, sup: e.agent("support", auth.ReadOnly, "acme")}
}

// packet assembles a support packet pinning keys, with a task when task
// is not "".
func (w suspectWorld) packet(task, step string, pins ...string) string {
	w.t.Helper()
	body := map[string]any{"target_role": "support", "token_budget": 4000, "pins": append([]string{}, pins...)}
	if task != "" {
		body["task"] = map[string]any{"task_id": task, "step_id": step, "objective": "answer the customer"}
	}
	r := w.do("POST", "/v1/projects/acme/packets", w.sup, body)
	require.Equal(w.t, 201, r.status, r.text)
	return r.json["packet_id"].(string)
}

func (w suspectWorld) outcome(key, id, status string, answer ...string) {
	w.t.Helper()
	body := map[string]any{"status": status}
	if len(answer) > 0 {
		body["answer"] = answer[0]
	}
	r := w.do("POST", "/v1/projects/acme/packets/"+id+"/outcomes", key, body)
	require.Equal(w.t, 201, r.status, r.text)
}

func (w suspectWorld) suspects(key, id string) []map[string]any {
	w.t.Helper()
	r := w.do("GET", "/v1/projects/acme/packets/"+id+"/suspects", key, nil)
	require.Equal(w.t, 200, r.status, r.text)
	require.Equal(w.t, id, r.json["packet_id"])
	out := []map[string]any{}
	for _, s := range r.json["suspects"].([]any) {
		out = append(out, s.(map[string]any))
	}
	return out
}

// evidenceOf is a suspect's evidence of a kind, nil when it has none.
func evidenceOf(s map[string]any, kind string) map[string]any {
	for _, ev := range s["evidence"].([]any) {
		if m := ev.(map[string]any); m["kind"] == kind {
			return m
		}
	}
	return nil
}

// rebackfill wipes the counters and runs migration 00033's Up again,
// whose backfill counts them from packet_outcomes and packet_records.
func (w suspectWorld) rebackfill() {
	w.t.Helper()
	src, err := os.ReadFile("../../migrations/00033_outcome_counts.sql")
	require.NoError(w.t, err)
	up, _, _ := strings.Cut(string(src), "-- +goose Down")
	ctx := context.Background()
	_, err = w.pool.Exec(ctx, "DELETE FROM outcome_counts; DELETE FROM outcome_totals")
	require.NoError(w.t, err)
	_, err = w.pool.Exec(ctx, up)
	require.NoError(w.t, err)
}

func counts(ev map[string]any) [4]int {
	return [4]int{int(ev["failures_with"].(float64)), int(ev["successes_with"].(float64)),
		int(ev["failures_without"].(float64)), int(ev["successes_without"].(float64))}
}

func suspectKeys(sus []map[string]any) []string {
	out := []string{}
	for _, s := range sus {
		out = append(out, s["key"].(string))
	}
	return out
}

// TestSuspectsRankTheItemThatDrivesFailures: of 12 packets, the 6 that
// pin x fail and the 6 that pin y succeed; x ranks first of a failing
// packet, correlational, 6/0 with and 0/6 without; the answer that quoted
// x names it used. An ablation of that packet without x that succeeds
// makes x causal (and counts: 7 successes without). A packet that only
// succeeded has no suspects.
func TestSuspectsRankTheItemThatDrivesFailures(t *testing.T) {
	t.Parallel()
	w := newSuspectWorld(t, "x", "y")
	var failing, passing []string
	for i := range 12 {
		if i%2 == 0 {
			failing = append(failing, w.packet("", "", "x"))
		} else {
			passing = append(passing, w.packet("", "", "y"))
		}
	}
	for i, id := range failing {
		if i == 0 {
			w.outcome(w.sup, id, "failure", "Sorry. The rule called x says something specific about refunds.")
		} else {
			w.outcome(w.sup, id, "failure")
		}
	}
	for _, id := range passing {
		w.outcome(w.sup, id, "success")
	}

	sus := w.suspects(w.sup, failing[0])
	require.NotEmpty(t, sus)
	top := sus[0]
	require.Equal(t, "x", top["key"], "%v", suspectKeys(sus))
	require.Equal(t, "item", top["subject"])
	require.Equal(t, "acme", top["project"])
	require.Equal(t, float64(1), top["version"])
	require.Equal(t, "correlational", top["confidence"])
	c := evidenceOf(top, "contrast")
	require.NotNil(t, c, "%v", top)
	require.Equal(t, [4]int{6, 0, 0, 6}, counts(c))
	require.Equal(t, "role", c["scope"])
	require.InDelta(t, 7.0/8-1.0/8, c["contrast"], 1e-4)
	used := evidenceOf(top, "used")
	require.NotNil(t, used, "the answer quoted x: %v", top)
	require.Equal(t, float64(1), used["similarity"])
	require.Nil(t, evidenceOf(top, "ablation"))
	for _, s := range sus[1:] {
		require.Less(t, s["score"].(float64), top["score"].(float64))
		require.Equal(t, "correlational", s["confidence"])
		if s["key"] == "always" {
			require.Equal(t, [4]int{6, 6, 0, 0}, counts(evidenceOf(s, "contrast")))
		}
	}
	require.NotContains(t, suspectKeys(sus), "y", "y is not in the packet")
	again := w.do("GET", "/v1/projects/acme/packets/"+failing[0]+"/suspects", w.sup, nil)
	require.Equal(t, again.text, w.do("GET", "/v1/projects/acme/packets/"+failing[0]+"/suspects", w.sup, nil).text, "same bytes")

	require.Empty(t, w.suspects(w.sup, passing[0]), "a packet that succeeded has nothing to explain")
	require.Empty(t, w.suspects(w.sup, w.packet("", "", "x")), "nor one without outcomes")

	r := w.do("POST", "/v1/projects/acme/packets/"+failing[1]+"/ablations", w.sup, without(api.AblationEntry{Key: ptr("x")}))
	require.Equal(t, 201, r.status, r.text)
	abl := r.json["packet_id"].(string)
	require.Equal(t, "correlational", w.suspects(w.sup, failing[1])[0]["confidence"], "no outcome on the ablation yet")
	w.outcome(w.sup, abl, "success")

	sus = w.suspects(w.sup, failing[1])
	top = sus[0]
	require.Equal(t, "x", top["key"])
	require.Equal(t, "causal", top["confidence"])
	require.Equal(t, abl, evidenceOf(top, "ablation")["packet_id"])
	require.Equal(t, [4]int{6, 0, 0, 7}, counts(evidenceOf(top, "contrast")), "the ablation's success counts without x")
	for _, s := range sus[1:] {
		require.Equal(t, "correlational", s["confidence"])
	}
	require.Equal(t, "correlational", w.suspects(w.sup, failing[2])[0]["confidence"], "the ablation proves x for its own packet only")

	// The migration's backfill counts the same from packet_outcomes and
	// packet_records as the writes did: wiped and backfilled, every
	// answer is the same bytes.
	before := map[string]string{}
	for _, id := range append(append([]string{abl}, failing...), passing...) {
		before[id] = w.do("GET", "/v1/projects/acme/packets/"+id+"/suspects", w.sup, nil).text
	}
	w.rebackfill()
	require.Contains(t, before[failing[1]], `"causal"`)
	for id, want := range before {
		require.Equal(t, want, w.do("GET", "/v1/projects/acme/packets/"+id+"/suspects", w.sup, nil).text, id)
	}
}

// TestSuspectsHideWhatTheRoleMayNotSee: x, visible when the packets were
// made and hidden from support since, never shows to support (its
// contrast neither), while an admin sees it ranked first. Another role's
// packet, one that does not exist and an outsider are 404 (or 403).
func TestSuspectsHideWhatTheRoleMayNotSee(t *testing.T) {
	t.Parallel()
	w := newSuspectWorld(t, "x", "y")
	bad := w.packet("", "", "x", "y")
	good := w.packet("", "", "y")
	w.outcome(w.sup, bad, "failure")
	w.outcome(w.sup, good, "success")
	require.Equal(t, "x", w.suspects(w.sup, bad)[0]["key"])

	w.batch("acme", []api.BatchItem{{Key: "x", Content: "The rule called x says something specific about refunds.",
		Trigger: &api.Trigger{PinnedOnly: ptr(true)}, Roles: &api.Roles{HiddenFrom: &[]string{"support"}}}})
	sus := w.suspects(w.sup, bad)
	require.NotEmpty(t, sus)
	require.NotContains(t, suspectKeys(sus), "x")
	admin := w.suspects(w.admin, bad)
	require.Equal(t, "x", admin[0]["key"], "%v", suspectKeys(admin))
	require.Equal(t, [4]int{1, 0, 0, 1}, counts(evidenceOf(admin[0], "contrast")))

	billing := w.agent("billing", auth.Edit, "acme")
	r := w.do("GET", "/v1/projects/acme/packets/"+bad+"/suspects", billing, nil)
	require.Equal(t, 404, r.status, "another role's packet: %s", r.text)
	r = w.do("GET", "/v1/projects/acme/packets/ctxpkt_nosuch/suspects", w.sup, nil)
	require.Equal(t, 404, r.status, r.text)
	w.project("other")
	outsider := w.agent("support", auth.ReadOnly, "other")
	r = w.do("GET", "/v1/projects/acme/packets/"+bad+"/suspects", outsider, nil)
	require.Contains(t, []int{403, 404}, r.status, r.text)
}

// TestSuspectsChangedSinceTheTasksLastSuccess: a task's packet succeeded
// with x v1; x changed to v2 and the next packet of the task failed: x is
// changed (since that packet, previous version 1), the always-on item is
// not; the contrast is the task's.
func TestSuspectsChangedSinceTheTasksLastSuccess(t *testing.T) {
	t.Parallel()
	w := newSuspectWorld(t, "x")
	first := w.packet("t-1", "s-1", "x")
	w.outcome(w.sup, first, "success")
	w.batch("acme", []api.BatchItem{{Key: "x", Content: "The rule called x now says something else entirely.",
		Trigger: &api.Trigger{PinnedOnly: ptr(true)}}})
	w.outcome(w.sup, w.packet("", "", "x"), "success") // role-wide only
	second := w.packet("t-1", "s-1", "x")
	w.outcome(w.sup, second, "failure")

	sus := w.suspects(w.sup, second)
	top := sus[0]
	require.Equal(t, "x", top["key"], "%v", suspectKeys(sus))
	require.Equal(t, float64(2), top["version"])
	ch := evidenceOf(top, "changed")
	require.NotNil(t, ch, "%v", top)
	require.Equal(t, first, ch["since_packet"])
	require.Equal(t, float64(1), ch["previous_version"])
	c := evidenceOf(top, "contrast")
	require.Equal(t, "task", c["scope"])
	require.Equal(t, [4]int{1, 0, 0, 1}, counts(c), "the task's outcomes only: x v1's success is without x v2")
	for _, s := range sus {
		if s["key"] == "always" {
			require.Nil(t, evidenceOf(s, "changed"))
		}
	}
}

// TestSuspectCountersMatchRecordsAndOutcomes: random packets (random pins,
// half with a task) get random outcomes, written concurrently; for every
// packet with a failure, each suspect's four counts equal those computed
// from the packets' records and outcomes as the API lists them, in the
// packet's scope (its task and step, else the role).
func TestSuspectCountersMatchRecordsAndOutcomes(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 36))
	keys := []string{"k1", "k2", "k3", "k4", "k5"}
	w := newSuspectWorld(t, keys...)
	pks := randomOutcomes(t, w, rng, keys)
	included, outcomes := whatTheAPISays(t, w, pks)
	checked := 0
	for _, p := range pks {
		sus := w.suspects(w.sup, p.id)
		failed := false
		for _, st := range p.statuses {
			failed = failed || st != "success"
		}
		if !failed {
			require.Empty(t, sus)
			continue
		}
		require.Len(t, sus, len(included[p.id]), "every included entry is ranked")
		for _, s := range sus {
			v, _ := s["version"].(float64)
			e := suspectEntry{s["subject"].(string), s["key"].(string), int(v)}
			require.True(t, included[p.id][e], "%v", e)
			var want [4]int
			for _, q := range pks {
				if q.task != p.task && p.task != "" { // the scope: the task and step, or the role
					continue
				}
				for _, st := range outcomes[q.id] {
					i := 0
					if st == "success" {
						i = 1
					}
					if !included[q.id][e] {
						i += 2
					}
					want[i]++
				}
			}
			require.Equal(t, want, counts(evidenceOf(s, "contrast")), "packet %s entry %v", p.id, e)
			checked++
		}
	}
	t.Logf("%d suspects checked", checked)

	// The migration's backfill counts what the concurrent writes did.
	before := map[string]string{}
	for _, p := range pks {
		before[p.id] = w.do("GET", "/v1/projects/acme/packets/"+p.id+"/suspects", w.sup, nil).text
	}
	w.rebackfill()
	for _, p := range pks {
		require.Equal(t, before[p.id], w.do("GET", "/v1/projects/acme/packets/"+p.id+"/suspects", w.sup, nil).text, p.id)
	}
}

// suspectPacket is a packet of the property test and the outcomes written
// for it.
type suspectPacket struct {
	id, task string
	statuses []string
}

type suspectEntry struct {
	subject, key string
	version      int
}

// randomOutcomes assembles 14 packets pinning random keys, half of them of
// a task, and writes 0 to 2 random outcomes for each, concurrently.
func randomOutcomes(t *testing.T, w suspectWorld, rng *rand.Rand, keys []string) []*suspectPacket {
	var pks []*suspectPacket
	for range 14 {
		var pins []string
		for _, k := range keys {
			if rng.IntN(2) == 0 {
				pins = append(pins, k)
			}
		}
		p := &suspectPacket{}
		if rng.IntN(2) == 0 {
			p.task = fmt.Sprintf("t-%d", rng.IntN(2))
		}
		p.id = w.packet(p.task, "s", pins...)
		for range rng.IntN(3) {
			p.statuses = append(p.statuses, []string{"success", "failure", "partial"}[rng.IntN(3)])
		}
		pks = append(pks, p)
	}
	var wg sync.WaitGroup
	for _, p := range pks {
		wg.Go(func() {
			for _, st := range p.statuses {
				r := w.do("POST", "/v1/projects/acme/packets/"+p.id+"/outcomes", w.sup, map[string]any{"status": st})
				if r.status != 201 {
					t.Errorf("outcome %s: %d %s", p.id, r.status, r.text)
				}
			}
		})
	}
	wg.Wait()
	return pks
}

// whatTheAPISays is each packet's included entries and outcomes, as the
// records and outcomes endpoints answer them.
func whatTheAPISays(t *testing.T, w suspectWorld, pks []*suspectPacket) (map[string]map[suspectEntry]bool, map[string][]string) {
	included := map[string]map[suspectEntry]bool{}
	outcomes := map[string][]string{}
	for _, p := range pks {
		included[p.id] = map[suspectEntry]bool{}
		for _, rec := range w.do("GET", "/v1/projects/acme/packets/"+p.id+"/records?decision=included&limit=1000", w.sup, nil).list() {
			v, _ := rec["version"].(float64)
			included[p.id][suspectEntry{rec["subject"].(string), rec["key"].(string), int(v)}] = true
		}
		for _, o := range w.do("GET", "/v1/projects/acme/packets/"+p.id+"/outcomes?limit=1000", w.sup, nil).list() {
			outcomes[p.id] = append(outcomes[p.id], o["status"].(string))
		}
		require.ElementsMatch(t, p.statuses, outcomes[p.id])
	}
	return included, outcomes
}

// TestSuspectsCausalOnlyWhenTheAblationIsMinimal: a success without x and
// y together proves neither (some of the two mattered); a failure without
// y alone does not either; once the packet without x alone failed too,
// both are needed for the success and both are causal, z never.
func TestSuspectsCausalOnlyWhenTheAblationIsMinimal(t *testing.T) {
	t.Parallel()
	w := newSuspectWorld(t, "x", "y", "z")
	id := w.packet("", "", "x", "y", "z")
	w.outcome(w.sup, id, "failure")
	ablate := func(status string, keys ...string) string {
		var entries []api.AblationEntry
		for _, k := range keys {
			entries = append(entries, api.AblationEntry{Key: ptr(k)})
		}
		r := w.do("POST", "/v1/projects/acme/packets/"+id+"/ablations", w.sup, api.AblatePacketJSONRequestBody{Without: entries})
		require.Equal(t, 201, r.status, r.text)
		abl := r.json["packet_id"].(string)
		w.outcome(w.sup, abl, status)
		return abl
	}
	causal := func() map[string]string {
		out := map[string]string{}
		for _, s := range w.suspects(w.sup, id) {
			if s["confidence"] == "causal" {
				out[s["key"].(string)] = evidenceOf(s, "ablation")["packet_id"].(string)
			}
		}
		return out
	}
	both := ablate("success", "x", "y")
	require.Empty(t, causal(), "a success without two entries proves neither")
	ablate("failure", "y")
	require.Empty(t, causal(), "without y alone failed: x is not yet shown needed")
	ablate("failure", "x")
	require.Equal(t, map[string]string{"x": both, "y": both}, causal())
}
