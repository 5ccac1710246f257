package server_test

// Black-box scenarios for bounded assembly (pipeline 2), written against the
// README ("Packets: the main job", "Bounded assembly (pipeline 2)") and
// api/openapi.yaml, through the HTTP API only (plus read-only SQL for the
// stored pipeline version, and one forged pre-migration packet row).

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/tiktoken-go/tokenizer"

	"github.com/contextd/contextd/internal/auth"
)

// ---------------------------------------------------------------- helpers

// b8Tries is the number of candidates tried after the first budget miss.
const b8Tries = 32

type b8Packet struct {
	r        resp
	id       string
	rendered string
	budget   map[string]any
	cutoff   map[string]any // nil when every candidate was tried
	excluded map[string]any
	body     map[string]any
}

func b8f(v any) int {
	f, ok := v.(float64)
	if !ok {
		return 0
	}
	return int(f)
}

// b8Assemble asks for a packet and parses the answer.
func b8Assemble(t *testing.T, e *env, proj, key string, body map[string]any) b8Packet {
	t.Helper()
	r := e.do("POST", "/v1/projects/"+proj+"/packets", key, body)
	require.Equal(t, 201, r.status, r.text)
	p := b8Packet{r: r, body: body, id: r.json["packet_id"].(string), rendered: r.json["rendered"].(string),
		budget: r.json["budget"].(map[string]any), excluded: r.json["excluded"].(map[string]any)}
	if c, ok := p.budget["cutoff"]; ok {
		require.NotNil(t, c, "cutoff is absent, not null, when every candidate was tried")
		p.cutoff = c.(map[string]any)
	}
	return p
}

func (p b8Packet) cutCount() int {
	if p.cutoff == nil {
		return 0
	}
	return b8f(p.cutoff["count"])
}

func (p b8Packet) cutRank() int {
	if p.cutoff == nil {
		return 1 << 30
	}
	return b8f(p.cutoff["rank"])
}

var b8Codecs sync.Map

// b8Tokens counts text with the real tokenizer, independently of contextd.
func b8Tokens(t *testing.T, name, text string) int {
	t.Helper()
	if name == "" {
		name = "o200k_base"
	}
	c, ok := b8Codecs.Load(name)
	if !ok {
		cc, err := tokenizer.Get(tokenizer.Encoding(name))
		require.NoError(t, err)
		c, _ = b8Codecs.LoadOrStore(name, cc)
	}
	n, err := c.(tokenizer.Codec).Count(text)
	require.NoError(t, err)
	return n
}

func b8Records(t *testing.T, e *env, proj, key, id string) []map[string]any {
	t.Helper()
	r := e.do("GET", "/v1/projects/"+proj+"/packets/"+id+"/records", key, nil)
	require.Equal(t, 200, r.status, r.text)
	return r.list()
}

// b8Layer is "project" or "shared" for an item record or why answer.
func b8Layer(m map[string]any) string {
	if l, ok := m["layer"].(string); ok && l != "" {
		return l
	}
	if m["project"] == "_shared" {
		return "shared"
	}
	return "project"
}

type b8Key struct{ key, layer string }

func (k b8Key) String() string { return k.layer + ":" + k.key }

func b8P(keys ...string) []b8Key {
	var out []b8Key
	for _, k := range keys {
		out = append(out, b8Key{k, "project"})
	}
	return out
}

func b8S(keys ...string) []b8Key {
	var out []b8Key
	for _, k := range keys {
		out = append(out, b8Key{k, "shared"})
	}
	return out
}

func b8Why(t *testing.T, e *env, proj, viewer, id string, k b8Key) resp {
	t.Helper()
	return e.do("GET", "/v1/projects/"+proj+"/packets/"+id+"/why?item="+url.QueryEscape(k.key)+"&layer="+k.layer, viewer, nil)
}

// b8WhyMany asks why for many keys concurrently (plain HTTP on worker
// goroutines; the answers are checked afterwards on the test goroutine).
func b8WhyMany(t *testing.T, e *env, proj, viewer, id string, keys []b8Key) []resp {
	t.Helper()
	out := make([]resp, len(keys))
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	next := make(chan int)
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				k := keys[i]
				req, err := http.NewRequest("GET", e.url+"/v1/projects/"+proj+"/packets/"+id+"/why?item="+url.QueryEscape(k.key)+"&layer="+k.layer, nil)
				if err != nil {
					errs[i] = err
					continue
				}
				req.Header.Set("Authorization", "Bearer "+viewer)
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					errs[i] = err
					continue
				}
				raw, err := io.ReadAll(res.Body)
				res.Body.Close()
				if err != nil {
					errs[i] = err
					continue
				}
				r := resp{status: res.StatusCode, header: res.Header, text: string(raw)}
				errs[i] = json.Unmarshal(raw, &r.json)
				out[i] = r
			}
		}()
	}
	for i := range keys {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "why %v", keys[i])
	}
	return out
}

// b8ItemRecords indexes a packet's item records by layer and key.
func b8ItemRecords(recs []map[string]any) map[b8Key]map[string]any {
	out := map[b8Key]map[string]any{}
	for _, r := range recs {
		if r["subject"] != "item" {
			continue
		}
		out[b8Key{r["key"].(string), b8Layer(r)}] = r
	}
	return out
}

var b8Allowed = map[string]bool{"packet_id": true, "project": true, "created_at": true, "created_by": true, "target_role": true,
	"task_id": true, "format": true, "tokenizer": true, "rendered": true, "rendered_sha256": true, "budget": true,
	"provenance_summary": true, "sections": true, "excluded": true}

// b8Check checks what holds for every packet as the viewer sees it, and
// returns the viewer's records.
func b8Check(t *testing.T, e *env, proj, viewer string, p b8Packet, admin bool) []map[string]any {
	t.Helper()
	headroom, budgetGaps := b8CheckBudget(t, p)
	recs, ranks, reasons, budgetRecs := b8CheckRecords(t, e, proj, viewer, p, admin)
	b8CheckCounts(t, p, admin, headroom, ranks, reasons, budgetRecs, budgetGaps)
	b8CheckStored(t, e, proj, viewer, p)
	return recs
}

// b8CheckBudget checks the budget's figures and returns the headroom and
// the budget gaps.
func b8CheckBudget(t *testing.T, p b8Packet) (int, []map[string]any) {
	t.Helper()
	tk, _ := p.body["tokenizer"].(string)
	used, allocated, headroom := b8f(p.budget["used"]), b8f(p.budget["allocated"]), b8f(p.budget["headroom"])
	require.Equal(t, b8Tokens(t, tk, p.rendered), used, "used is the exact token count of rendered")
	require.Equal(t, allocated-used, headroom, "headroom")
	if want, ok := p.body["token_budget"].(int); ok {
		require.Equal(t, want, allocated)
	}
	gaps, _ := p.budget["unresolved_gaps"].([]any)
	inviolable := false
	var budgetGaps []map[string]any
	for _, g := range gaps {
		gm := g.(map[string]any)
		switch gm["reason"] {
		case "budget":
			budgetGaps = append(budgetGaps, gm)
		case "budget_exceeded_by_inviolable":
			require.False(t, inviolable, "one inviolable gap")
			inviolable = true
		default:
			t.Fatalf("unknown gap %v", gm)
		}
	}
	if !inviolable {
		require.LessOrEqual(t, used, allocated, "used <= token_budget unless the request parts alone exceed it")
	}
	require.NotContains(t, p.rendered, "{{", "a template is never half-filled")
	return headroom, budgetGaps
}

// b8CheckRecords checks records, sections and spans.
func b8CheckRecords(t *testing.T, e *env, proj, viewer string, p b8Packet, admin bool) ([]map[string]any, map[int]string, map[string]int, []map[string]any) {
	t.Helper()
	// Records, sections and spans.
	recs := b8Records(t, e, proj, viewer, p.id)
	included := map[string]map[string]any{}
	ranks := map[int]string{}
	var budgetRecs []map[string]any
	reasons := map[string]int{}
	for _, r := range recs {
		if sp, ok := r["span"].(map[string]any); ok {
			// Included entries, and the contradiction lines of losers.
			included[fmt.Sprintf("%v/%v/%v@%v", r["subject"], r["project"], r["key"], b8f(sp["start"]))] = r
		}
		if r["decision"] == "included" {
			require.Contains(t, r, "span", "an included record has a span")
		} else {
			require.Equal(t, "excluded", r["decision"])
			reasons[r["reason"].(string)]++
			require.NotEqual(t, "budget_cutoff", r["reason"], "an untried candidate has no record")
		}
		if r["reason"] == "budget" {
			budgetRecs = append(budgetRecs, r)
		}
		if r["subject"] == "item" && b8f(r["rank"]) > 0 {
			k := fmt.Sprint(r["project"], "/", r["key"])
			prev, dup := ranks[b8f(r["rank"])]
			require.False(t, dup, "rank %d given to %s and %s", b8f(r["rank"]), prev, k)
			ranks[b8f(r["rank"])] = k
		}
		if !admin {
			require.NotEqual(t, "hidden", r["reason"], "only admins see hidden records")
		}
	}
	for i := 1; i <= len(ranks); i++ {
		require.Contains(t, ranks, i, "ranks of tried candidates are 1..n without holes (%d ranks)", len(ranks))
	}
	entries := 0
	var spans [][2]int
	for _, s := range p.r.json["sections"].([]any) {
		for _, en := range s.(map[string]any)["entries"].([]any) {
			entry := en.(map[string]any)
			sp := entry["span"].(map[string]any)
			start, end := b8f(sp["start"]), b8f(sp["end"])
			require.True(t, start >= 0 && end > start && end <= len(p.rendered), "span %v of %v", sp, entry["key"])
			spans = append(spans, [2]int{start, end})
			entries++
			rec, ok := included[fmt.Sprintf("%v/%v/%v@%v", entry["subject"], entry["project"], entry["key"], start)]
			require.True(t, ok, "section entry %v has its included record", entry)
			require.Equal(t, rec["span"], entry["span"])
			require.Equal(t, rec["tokens"], entry["tokens"])
			require.Equal(t, rec["rule"], entry["rule"])
			require.Equal(t, rec["decision"], entry["decision"])
			if entry["decision"] != "included" {
				require.Equal(t, "contradicted", entry["reason"], "only a contradiction line is an excluded entry")
			}
		}
	}
	require.Equal(t, len(included), entries, "every record with a span is a section entry")
	sort.Slice(spans, func(i, j int) bool { return spans[i][0] < spans[j][0] })
	for i := 1; i < len(spans); i++ {
		require.LessOrEqual(t, spans[i-1][1], spans[i][0], "spans %v and %v overlap", spans[i-1], spans[i])
	}
	return recs, ranks, reasons, budgetRecs
}

// b8CheckCounts checks excluded counts, the cutoff and the gaps.
func b8CheckCounts(t *testing.T, p b8Packet, admin bool, headroom int, ranks map[int]string, reasons map[string]int, budgetRecs, budgetGaps []map[string]any) {
	t.Helper()
	// Excluded counts are totals; the cutoff's count is excluded.budget_cutoff.
	for reason, n := range reasons {
		require.Equal(t, float64(n), p.excluded[reason], "excluded[%s] counts the viewer's records", reason)
	}
	for reason := range p.excluded {
		if reason != "budget_cutoff" {
			require.Contains(t, reasons, reason, "excluded[%s] without records", reason)
		}
	}
	if !admin {
		require.NotContains(t, p.excluded, "hidden")
	}
	sort.Slice(budgetRecs, func(i, j int) bool { return b8f(budgetRecs[i]["rank"]) < b8f(budgetRecs[j]["rank"]) })
	if p.cutoff != nil {
		require.Positive(t, p.cutCount())
		require.Equal(t, float64(p.cutCount()), p.excluded["budget_cutoff"])
		require.Equal(t, float64(headroom), p.cutoff["headroom"])
		require.NotEmpty(t, budgetRecs, "a cutoff follows a budget miss")
		first := b8f(budgetRecs[0]["rank"])
		require.Equal(t, first+b8Tries+1, p.cutRank(), "exactly %d tried after the first miss at rank %d", b8Tries, first)
		require.Equal(t, p.cutRank()-1, len(ranks), "the cutoff's rank follows the last tried")
		require.Len(t, p.cutoff, 3)
	} else {
		require.NotContains(t, p.excluded, "budget_cutoff")
		if len(budgetRecs) > 0 {
			require.LessOrEqual(t, len(ranks)-b8f(budgetRecs[0]["rank"]), b8Tries)
		}
	}
	// Gaps: the highest-ranked budget exclusions, at most 20, in rank order.
	require.LessOrEqual(t, len(budgetGaps), 20)
	require.Equal(t, min(20, len(budgetRecs)), len(budgetGaps))
	for i, g := range budgetGaps {
		require.Equal(t, budgetRecs[i]["key"], g["key"], "gap %d", i)
		require.Equal(t, budgetRecs[i]["tokens"], g["tokens"], "gap %d", i)
	}
	require.Equal(t, float64(len(budgetRecs)+p.cutCount()-len(budgetGaps)), p.budget["unresolved_gaps_more"])
}

// b8CheckStored checks the answer's members, the stored packet and replay.
func b8CheckStored(t *testing.T, e *env, proj, viewer string, p b8Packet) {
	t.Helper()
	// The answer holds the text, sections, budget and capped gaps only.
	for k := range p.r.json {
		require.True(t, b8Allowed[k], "unexpected member %q in the packet answer", k)
	}
	secs, err := json.Marshal(p.r.json["sections"])
	require.NoError(t, err)
	require.LessOrEqual(t, len(p.r.text)-len(secs), 2*len(p.rendered)+16<<10)

	// The stored packet answers the same; replay is identical.
	g := e.do("GET", "/v1/projects/"+proj+"/packets/"+p.id, viewer, nil)
	require.Equal(t, 200, g.status, g.text)
	require.Equal(t, p.budget, g.json["budget"])
	require.Equal(t, p.r.json["excluded"], g.json["excluded"])
	require.Equal(t, p.rendered, g.json["rendered"])
	require.Equal(t, p.r.json["sections"], g.json["sections"])
	rp := e.do("POST", "/v1/projects/"+proj+"/packets/"+p.id+"/replay", viewer, nil)
	require.Equal(t, 200, rp.status, rp.text)
	require.Equal(t, true, rp.json["identical"], rp.text)
	require.Empty(t, rp.json["differences"])
	require.Equal(t, p.r.json["rendered_sha256"], rp.json["rendered_sha256_now"])
	var pipeline int
	require.NoError(t, e.pool.QueryRow(t.Context(), "SELECT pipeline FROM packets WHERE id = $1", p.id).Scan(&pipeline))
	require.Equal(t, 2, pipeline, "new packets are pipeline 2")
}

type b8WhyResult struct {
	answers  map[b8Key]resp
	reasons  map[string]int // "included", "budget", "budget_cutoff", "contradicted", "not_candidate/not_valid", ...
	pastCut  int            // visible candidates past the cutoff that a stage would drop (counted, not judged)
	notFound []b8Key
}

func b8WhyLabel(w resp) string {
	d, _ := w.json["decision"].(string)
	r, _ := w.json["reason"].(string)
	switch d {
	case "included":
		return "included"
	case "not_candidate":
		return "not_candidate/" + r
	}
	return r
}

// b8WhyAll asks why for every key and checks each answer against the
// records and the cutoff. hidden tells which keys the target role may not
// see (a non-admin viewer is told those never existed).
func b8WhyAll(t *testing.T, e *env, proj, viewer string, p b8Packet, recs []map[string]any, keys []b8Key, hidden func(b8Key) bool, admin bool) b8WhyResult {
	t.Helper()
	return b8WhyAllOf(t, e, proj, viewer, p, recs, keys, hidden, admin, false)
}

// b8WhyAllOf with partial set checks each answer but not that the keys
// cover every rank (the caller knows which candidates it left out).
func b8WhyAllOf(t *testing.T, e *env, proj, viewer string, p b8Packet, recs []map[string]any, keys []b8Key, hidden func(b8Key) bool, admin, partial bool) b8WhyResult {
	t.Helper()
	byKey := b8ItemRecords(recs)
	res := b8WhyResult{answers: map[b8Key]resp{}, reasons: map[string]int{}}
	visibleRanks := map[int]b8Key{}
	all := b8WhyMany(t, e, proj, viewer, p.id, keys)
	for i, k := range keys {
		w := all[i]
		if !admin && hidden(k) {
			// Answered as a key that never existed (issue 11; was 404).
			require.Equal(t, 200, w.status, "%v is hidden from the role: %s", k, w.text)
			require.Equal(t, "did_not_exist", w.json["reason"], "%v is hidden from the role: %s", k, w.text)
			require.Equal(t, fmt.Sprintf("no item %q existed in %s or _shared when the packet was assembled", k.key, proj), w.json["detail"], "%v", k)
			res.notFound = append(res.notFound, k)
			continue
		}
		require.Equal(t, 200, w.status, "%v: %s", k, w.text)
		res.answers[k] = w
		label := b8WhyLabel(w)
		res.reasons[label]++
		if hidden(k) {
			if w.json["decision"] != "not_candidate" { // a hidden item whose trigger never fired is no candidate
				require.Equal(t, "hidden", label, "%v", k)
			}
			continue
		}
		if w.json["decision"] != "not_candidate" {
			require.Equal(t, k.layer, b8Layer(w.json), "%v answers its own layer: %s", k, w.text)
		}
		rec, recorded := byKey[k]
		rank := b8f(w.json["rank"])
		switch label {
		case "included", "budget":
			require.True(t, recorded, "%v is %s but has no record", k, label)
			require.Equal(t, rec["decision"], w.json["decision"], "%v", k)
			require.Equal(t, float64(rank), rec["rank"], "%v", k)
			if label == "included" {
				require.Equal(t, rec["span"], w.json["span"], "%v", k)
			}
			require.Less(t, rank, p.cutRank(), "%v tried at rank %d, cutoff %d", k, rank, p.cutRank())
		case "budget_cutoff":
			require.NotNil(t, p.cutoff, "%v answers budget_cutoff in a packet without a cutoff", k)
			require.False(t, recorded, "%v was not tried, so it has no record", k)
			require.Equal(t, "excluded", w.json["decision"])
			require.Equal(t, p.cutoff, w.json["cutoff"], "%v", k)
			require.GreaterOrEqual(t, rank, p.cutRank(), "%v", k)
		default:
			if recorded {
				require.Equal(t, rec["reason"], w.json["reason"], "%v", k)
			} else if w.json["decision"] == "excluded" {
				// Dropped by a stage but not met before the budget stopped:
				// counted in the cutoff, judged only by why.
				require.NotNil(t, p.cutoff, "%v excluded (%s) without a record and without a cutoff", k, label)
				require.Equal(t, p.cutoff, w.json["cutoff"], "%v", k)
				require.GreaterOrEqual(t, rank, p.cutRank(), "%v", k)
				res.pastCut++
			}
		}
		if label == "included" || label == "budget" || label == "budget_cutoff" || (rank > 0 && !recorded) {
			prev, dup := visibleRanks[rank]
			require.False(t, dup, "rank %d answered for %v and %v", rank, prev, k)
			visibleRanks[rank] = k
		}
	}
	if partial {
		return res
	}
	// Every rank from 1 to the last candidate belongs to one visible candidate.
	if p.cutoff != nil {
		for i := 1; i < p.cutRank()+p.cutCount(); i++ {
			require.Contains(t, visibleRanks, i, "no candidate answers rank %d (cutoff %v)", i, p.cutoff)
		}
		require.Len(t, visibleRanks, p.cutRank()+p.cutCount()-1)
	}
	require.Equal(t, p.cutCount(), res.reasons["budget_cutoff"]+res.pastCut, "budget_cutoff answers + untried stage drops == cutoff.count")
	return res
}

// b8Filler is a line of about n words.
func b8Filler(i, n int) string {
	return fmt.Sprintf("Fact %d: %s", i, strings.Repeat("plain filler words ", n))
}

func b8None(b8Key) bool { return false }

// ---------------------------------------------------------------- scenarios

// TestBlackbox8ExactlyThirtyTwoTries: a first candidate that cannot fit,
// then 31, 32 or 33 small ones that all would fit. With 31 or 32 every
// candidate is tried (no cutoff); with 33 the last one is excluded untried.
func TestBlackbox8ExactlyThirtyTwoTries(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, after := range []int{31, 32, 33, 40} {
		proj := fmt.Sprintf("tries%d", after)
		e.project(proj)
		items := []map[string]any{{"key": "huge", "content": strings.Repeat("word ", 400), "priority": 1000}}
		keys := b8P("huge")
		for i := range after {
			k := fmt.Sprintf("small.%03d", i)
			items = append(items, map[string]any{"key": k, "content": "tiny", "priority": 500 - i})
			keys = append(keys, b8Key{k, "project"})
		}
		e.batch(proj, items)
		sup := e.agent("support", auth.ReadOnly, proj)
		p := b8Assemble(t, e, proj, sup, map[string]any{"target_role": "support", "token_budget": 300})
		recs := b8Check(t, e, proj, sup, p, false)
		byKey := b8ItemRecords(recs)
		require.Equal(t, "budget", byKey[b8Key{"huge", "project"}]["reason"])
		require.Equal(t, 1.0, byKey[b8Key{"huge", "project"}]["rank"])
		tried := min(after, b8Tries)
		for i := range after {
			k := b8Key{fmt.Sprintf("small.%03d", i), "project"}
			if i < tried {
				require.Equal(t, "included", byKey[k]["decision"], "%v is one of the %d tries and fits", k, b8Tries)
			} else {
				require.NotContains(t, byKey, k, "%v is past the cutoff: no record", k)
				require.NotContains(t, p.rendered, fmt.Sprintf("small.%03d", i))
			}
		}
		if after <= b8Tries {
			require.Nil(t, p.cutoff, "after=%d: every candidate was tried", after)
			require.Equal(t, 0.0, p.budget["unresolved_gaps_more"])
		} else {
			require.NotNil(t, p.cutoff, "after=%d", after)
			require.Equal(t, map[string]any{"rank": float64(b8Tries + 2), "headroom": float64(300 - b8f(p.budget["used"])), "count": float64(after - b8Tries)}, p.cutoff)
			require.Equal(t, float64(after-b8Tries), p.budget["unresolved_gaps_more"], "the untried are budget exclusions beyond the one listed gap")
		}
		res := b8WhyAll(t, e, proj, sup, p, recs, keys, b8None, false)
		require.Equal(t, max(0, after-b8Tries), res.reasons["budget_cutoff"])
		require.Equal(t, tried, res.reasons["included"])
	}
}

// TestBlackbox8StageDropsInTheTryZone: after the first miss, items that a
// stage drops (a template without its value, a contradiction loser, a
// _shared item overridden by the project, an item hidden from the role, an
// expired one) do not use up the 32 tries, and are still recorded.
func TestBlackbox8StageDropsInTheTryZone(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("zone")
	items := []map[string]any{{"key": "huge", "content": strings.Repeat("word ", 400), "priority": 1000}}
	keys := b8P("huge")
	for i := range 60 {
		k := fmt.Sprintf("small.%03d", i)
		it := map[string]any{"key": k, "content": fmt.Sprintf("tiny %d", i), "priority": 500 - 2*i}
		switch i {
		case 3:
			it["template"], it["content"] = true, "Needs {{absent}} here."
		case 5:
			it["state_key"], it["authority"] = "zone.state", "hypothesis" // loser; ranks after every evidence item
		case 6:
			it["state_key"] = "zone.state" // winner (evidence)
		case 7:
			it["roles"] = map[string]any{"hidden_from": []string{"support"}}
		case 8:
			it["valid_until"] = "2020-01-01T00:00:00Z"
		}
		items = append(items, it)
		keys = append(keys, b8Key{k, "project"})
	}
	e.batch("zone", items)
	// A _shared item overridden by small.010, ranked in the try zone.
	e.batch("_shared", []map[string]any{{"key": "small.010", "content": "shared version", "priority": 481}})
	keys = append(keys, b8S("small.010")...)
	sup := e.agent("support", auth.ReadOnly, "zone")
	hidden := func(k b8Key) bool { return k.key == "small.007" && k.layer == "project" }
	body := map[string]any{"target_role": "support", "token_budget": 300}
	p := b8Assemble(t, e, "zone", sup, body)
	recs := b8Check(t, e, "zone", sup, p, false)
	byKey := b8ItemRecords(recs)
	require.Equal(t, 1.0, byKey[b8Key{"huge", "project"}]["rank"])
	require.Equal(t, float64(b8Tries+2), p.cutoff["rank"], "stage drops did not take any of the 32 tries")
	require.Equal(t, "template_unresolved", byKey[b8Key{"small.003", "project"}]["reason"])
	require.Equal(t, "contradicted", byKey[b8Key{"small.005", "project"}]["reason"], "the loser of a group met before the cutoff is recorded")
	require.Equal(t, "overridden", byKey[b8Key{"small.010", "shared"}]["reason"])
	require.NotContains(t, byKey, b8Key{"small.007", "project"}, "a hidden item is not recorded for a non-admin")
	require.NotContains(t, byKey, b8Key{"small.008", "project"}, "an expired item is not a candidate")
	require.NotContains(t, p.rendered, "shared version")
	require.NotContains(t, p.rendered, "Needs")
	// Visible candidates: huge + 60 small − template, loser, hidden, expired.
	require.Equal(t, 1+60-4, p.cutRank()-1+p.cutCount(), "every visible candidate is tried or counted")
	res := b8WhyAll(t, e, "zone", sup, p, recs, keys, hidden, false)
	require.Equal(t, p.cutCount(), res.reasons["budget_cutoff"])
	require.Equal(t, 0, res.pastCut)
	require.Equal(t, "not_candidate/not_valid", b8WhyLabel(res.answers[b8Key{"small.008", "project"}]))

	// The admin sees the hidden record, its count, and the same text.
	ap := b8Assemble(t, e, "zone", e.admin, body)
	require.Equal(t, p.rendered, ap.rendered)
	require.Equal(t, p.budget, ap.budget)
	arecs := b8Check(t, e, "zone", e.admin, ap, true)
	require.Equal(t, "hidden", b8ItemRecords(arecs)[b8Key{"small.007", "project"}]["reason"])
	require.Equal(t, 1.0, ap.excluded["hidden"])
	g := e.do("GET", "/v1/projects/zone/packets/"+p.id, e.admin, nil)
	require.Equal(t, 1.0, g.json["excluded"].(map[string]any)["hidden"], "an admin sees the hidden count of a support packet")
	g = e.do("GET", "/v1/projects/zone/packets/"+ap.id, sup, nil)
	require.Equal(t, 200, g.status, g.text)
	require.NotContains(t, g.json["excluded"], "hidden", "the role never sees a hidden count, whoever assembled")
	require.Equal(t, p.excluded, g.json["excluded"])

	// Injections name the packet for what it included, not for the untried.
	inj := e.do("GET", "/v1/projects/zone/items/small.000/injections", sup, nil)
	require.Equal(t, 200, inj.status, inj.text)
	var ids []any
	for _, x := range inj.list() {
		ids = append(ids, x["packet_id"])
	}
	require.Contains(t, ids, p.id)
	require.Contains(t, ids, ap.id)
	inj = e.do("GET", "/v1/projects/zone/items/small.059/injections", sup, nil)
	require.Equal(t, 200, inj.status, inj.text)
	require.Empty(t, inj.list(), "an item past the cutoff was injected nowhere")
}

// TestBlackbox8NoCutoff: with a budget that holds everything there is no
// cutoff member (in the answer and the stored packet), no budget_cutoff
// count, unresolved_gaps_more is 0, and why never says budget_cutoff. With
// a budget that misses more than 20 but no more than 32 after the first
// miss there is still no cutoff, and the gaps are capped at 20.
func TestBlackbox8NoCutoff(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("roomy")
	var items []map[string]any
	var keys []b8Key
	for i := range 40 {
		k := fmt.Sprintf("fact.%03d", i)
		items = append(items, map[string]any{"key": k, "content": b8Filler(i, 6), "priority": 100 - i})
		keys = append(keys, b8Key{k, "project"})
	}
	e.batch("roomy", items)
	sup := e.agent("support", auth.ReadOnly, "roomy")
	p := b8Assemble(t, e, "roomy", sup, map[string]any{"target_role": "support", "token_budget": 100000})
	require.NotContains(t, p.budget, "cutoff")
	require.NotContains(t, p.r.text, "cutoff")
	require.Equal(t, 0.0, p.budget["unresolved_gaps_more"])
	require.Empty(t, p.budget["unresolved_gaps"])
	require.Empty(t, p.excluded)
	recs := b8Check(t, e, "roomy", sup, p, false)
	res := b8WhyAll(t, e, "roomy", sup, p, recs, keys, b8None, false)
	require.Equal(t, 40, res.reasons["included"])
	g := e.do("GET", "/v1/projects/roomy/packets/"+p.id, sup, nil)
	require.NotContains(t, g.json["budget"], "cutoff")

	// The first item fits, every later one is too big: 39 misses > 32.
	e.project("tight")
	items = []map[string]any{{"key": "a.first", "content": "short", "priority": 1000}}
	keys = b8P("a.first")
	for i := range 30 {
		k := fmt.Sprintf("b.big.%03d", i)
		items = append(items, map[string]any{"key": k, "content": b8Filler(i, 60), "priority": 500 - i})
		keys = append(keys, b8Key{k, "project"})
	}
	e.batch("tight", items)
	sup2 := e.agent("support", auth.ReadOnly, "tight")
	p = b8Assemble(t, e, "tight", sup2, map[string]any{"target_role": "support", "token_budget": 150})
	require.Nil(t, p.cutoff, "30 misses are all tried")
	require.Equal(t, 30.0, p.excluded["budget"])
	require.Len(t, p.budget["unresolved_gaps"], 20)
	require.Equal(t, 10.0, p.budget["unresolved_gaps_more"])
	recs = b8Check(t, e, "tight", sup2, p, false)
	res = b8WhyAll(t, e, "tight", sup2, p, recs, keys, b8None, false)
	require.Equal(t, 30, res.reasons["budget"])
	require.Equal(t, 0, res.reasons["budget_cutoff"])
}

// TestBlackbox8WhyAgreesWithCutoff: in a world of plain always-on items in
// both layers with several roles, the why answers of every item agree with
// the records, and the number that answer budget_cutoff is cutoff.count,
// for each role; the admin's view differs only by the hidden ones.
func TestBlackbox8WhyAgreesWithCutoff(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("clean")
	rng := rand.New(rand.NewPCG(8, 1))
	var items, shared []map[string]any
	var keys []b8Key
	roleOf := map[b8Key]map[string]any{}
	auths := []string{"policy", "instruction", "evidence", "hypothesis"}
	confs := []string{"verified", "probable", "uncertain"}
	for i := range 110 {
		k := fmt.Sprintf("c.%03d", i)
		it := map[string]any{"key": k, "content": b8Filler(i, 1+rng.IntN(8)), "priority": rng.IntN(20),
			"authority": auths[rng.IntN(4)], "confidence": confs[rng.IntN(3)], "source": "human"}
		switch rng.IntN(6) {
		case 0:
			it["roles"] = map[string]any{"hidden_from": []string{"support"}}
		case 1:
			it["roles"] = map[string]any{"visible_to": []string{"critic"}}
		}
		if r, ok := it["roles"]; ok {
			roleOf[b8Key{k, "project"}] = r.(map[string]any)
		}
		items = append(items, it)
		keys = append(keys, b8Key{k, "project"})
	}
	for i := range 30 {
		k := fmt.Sprintf("s.%03d", i)
		it := map[string]any{"key": k, "content": b8Filler(1000+i, 1+rng.IntN(8)), "priority": rng.IntN(20), "authority": auths[rng.IntN(4)], "source": "human"}
		if i%7 == 0 {
			it["roles"] = map[string]any{"hidden_from": []string{"critic"}}
			roleOf[b8Key{k, "shared"}] = it["roles"].(map[string]any)
		}
		shared = append(shared, it)
		keys = append(keys, b8Key{k, "shared"})
	}
	e.batch("clean", items)
	e.batch("_shared", shared)
	hiddenFor := func(role string) func(b8Key) bool {
		return func(k b8Key) bool {
			r, ok := roleOf[k]
			if !ok {
				return false
			}
			if hf, ok := r["hidden_from"].([]string); ok && len(hf) > 0 && hf[0] == role {
				return true
			}
			if vt, ok := r["visible_to"].([]string); ok && len(vt) > 0 && vt[0] != role {
				return true
			}
			return false
		}
	}
	for _, role := range []string{"support", "critic"} {
		key := e.agent(role, auth.ReadOnly, "clean")
		body := map[string]any{"target_role": role, "token_budget": 500, "task": map[string]any{"objective": "Summarise the facts."}}
		p := b8Assemble(t, e, "clean", key, body)
		require.NotNil(t, p.cutoff, role)
		recs := b8Check(t, e, "clean", key, p, false)
		res := b8WhyAll(t, e, "clean", key, p, recs, keys, hiddenFor(role), false)
		require.Equal(t, p.cutCount(), res.reasons["budget_cutoff"], "%s: sum of budget_cutoff answers is cutoff.count", role)
		visible := 0
		for _, k := range keys {
			if !hiddenFor(role)(k) {
				visible++
			}
		}
		require.Equal(t, visible, p.cutRank()-1+p.cutCount(), "%s: every visible candidate is tried or counted", role)
		require.Equal(t, visible, res.reasons["included"]+res.reasons["budget"]+res.reasons["budget_cutoff"])
		require.Len(t, res.notFound, len(keys)-visible)

		// The admin's view of the same packet: same budget and text; the
		// hidden answer hidden; the other counts unchanged.
		a := b8Assemble(t, e, "clean", e.admin, body)
		require.Equal(t, p.rendered, a.rendered, role)
		require.Equal(t, p.budget, a.budget, role)
		arecs := b8Check(t, e, "clean", e.admin, a, true)
		ares := b8WhyAll(t, e, "clean", e.admin, a, arecs, keys, hiddenFor(role), true)
		require.Equal(t, len(keys)-visible, ares.reasons["hidden"], role)
		require.Equal(t, res.reasons["budget_cutoff"], ares.reasons["budget_cutoff"], role)
		for r, n := range a.excluded {
			if r != "hidden" {
				require.Equal(t, p.excluded[r], n, "%s: excluded[%s]", role, r)
			}
		}
	}
}

// b8Ladder is n always-on items of about the same size in strict priority
// order (prefix.000 first), after one huge item that cannot fit.
func b8Ladder(prefix string, n int) ([]map[string]any, []b8Key) {
	items := []map[string]any{{"key": prefix + "huge", "content": strings.Repeat("word ", 400), "priority": 10000}}
	keys := b8P(prefix + "huge")
	for i := range n {
		k := fmt.Sprintf("%s%03d", prefix, i)
		items = append(items, map[string]any{"key": k, "content": fmt.Sprintf("ladder step %d", i), "priority": 5000 - 10*i})
		keys = append(keys, b8Key{k, "project"})
	}
	return items, keys
}

// TestBlackbox8HiddenAroundTheCutoff: items hidden from the role before the
// first miss, inside the try zone and far after the cutoff never take a
// place (ranks, tries, count); a non-admin never learns of them (records,
// counts, why 404), an admin sees the ones met before the budget stopped
// as records and every one of them in why as hidden.
func TestBlackbox8HiddenAroundTheCutoff(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("veil")
	items, keys := b8Ladder("l.", 120)
	hiddenKeys := map[string]bool{}
	for _, at := range []int{-1, 0, 5, 17, 30, 60, 110} { // -1: before the huge one
		k := fmt.Sprintf("h.%03d", at+1)
		prio := 5000 - 10*at - 5
		if at < 0 {
			prio = 20000
		}
		items = append(items, map[string]any{"key": k, "content": "secret " + k, "priority": prio, "roles": map[string]any{"hidden_from": []string{"support"}}})
		keys = append(keys, b8Key{k, "project"})
		hiddenKeys[k] = true
	}
	// visible_to another role only, in the try zone and after the cutoff.
	for _, at := range []int{8, 90} {
		k := fmt.Sprintf("v.%03d", at)
		items = append(items, map[string]any{"key": k, "content": "critic only " + k, "priority": 5000 - 10*at - 5, "roles": map[string]any{"visible_to": []string{"critic"}}})
		keys = append(keys, b8Key{k, "project"})
		hiddenKeys[k] = true
	}
	e.batch("veil", items)
	hidden := func(k b8Key) bool { return hiddenKeys[k.key] }
	sup := e.agent("support", auth.ReadOnly, "veil")
	body := map[string]any{"target_role": "support", "token_budget": 200}
	p := b8Assemble(t, e, "veil", sup, body)
	require.NotNil(t, p.cutoff)
	// Ranks: the huge one is 1 although a hidden item outranks it.
	recs := b8Check(t, e, "veil", sup, p, false)
	byKey := b8ItemRecords(recs)
	require.Equal(t, 1.0, byKey[b8Key{"l.huge", "project"}]["rank"], "a hidden item never takes a place")
	require.Equal(t, float64(b8Tries+2), p.cutoff["rank"])
	require.Equal(t, 121-(b8Tries+1), p.cutCount(), "hidden items are not counted")
	for k := range hiddenKeys {
		require.NotContains(t, p.rendered, k)
	}
	require.NotContains(t, p.r.text, "secret")
	res := b8WhyAll(t, e, "veil", sup, p, recs, keys, hidden, false)
	require.Len(t, res.notFound, len(hiddenKeys))
	require.Equal(t, p.cutCount(), res.reasons["budget_cutoff"])

	// The admin, assembling the same request and reading the support packet.
	for _, id := range []string{p.id, b8Assemble(t, e, "veil", e.admin, body).id} {
		g := e.do("GET", "/v1/projects/veil/packets/"+id, e.admin, nil)
		require.Equal(t, 200, g.status)
		ap := b8Packet{r: g, id: id, body: body, rendered: g.json["rendered"].(string), budget: g.json["budget"].(map[string]any), excluded: g.json["excluded"].(map[string]any)}
		ap.cutoff = ap.budget["cutoff"].(map[string]any)
		require.Equal(t, p.rendered, ap.rendered)
		require.Equal(t, p.budget, ap.budget)
		arecs := b8Check(t, e, "veil", e.admin, ap, true)
		abyKey := b8ItemRecords(arecs)
		for _, k := range []string{"h.000", "h.001", "h.006", "h.018", "v.008"} { // met before the budget stopped
			require.Equal(t, "hidden", abyKey[b8Key{k, "project"}]["reason"], "%s is recorded for admins", k)
			require.Equal(t, 0.0, abyKey[b8Key{k, "project"}]["rank"], "%s is not ranked", k)
		}
		for _, k := range []string{"h.111", "v.090"} { // far past the cutoff: never met
			require.NotContains(t, abyKey, b8Key{k, "project"})
		}
		hiddenRecs := 0
		for _, r := range arecs {
			if r["reason"] == "hidden" {
				hiddenRecs++
			}
		}
		require.Equal(t, float64(hiddenRecs), ap.excluded["hidden"])
		ares := b8WhyAll(t, e, "veil", e.admin, ap, arecs, keys, hidden, true)
		require.Equal(t, len(hiddenKeys), ares.reasons["hidden"])
		require.Equal(t, p.cutCount(), ares.reasons["budget_cutoff"])
	}
}

// TestBlackbox8HiddenPastCutoffHasNoRank: "ranks count visible candidates
// only". A hidden item met before the budget stops is recorded with rank 0;
// one past the cutoff should not be given a rank either — least of all the
// rank of a visible candidate.
func TestBlackbox8HiddenPastCutoffHasNoRank(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("veil2")
	items, _ := b8Ladder("l.", 60)
	items = append(items, map[string]any{"key": "h.late", "content": "secret", "priority": 5000 - 10*50 - 5, "roles": map[string]any{"hidden_from": []string{"support"}}})
	e.batch("veil2", items)
	p := b8Assemble(t, e, "veil2", e.admin, map[string]any{"target_role": "support", "token_budget": 200})
	require.NotNil(t, p.cutoff)
	w := b8Why(t, e, "veil2", e.admin, p.id, b8Key{"h.late", "project"})
	require.Equal(t, "hidden", w.json["reason"], w.text)
	// h.late sits between l.050 and l.051 in rank order.
	next := b8Why(t, e, "veil2", e.admin, p.id, b8Key{"l.051", "project"})
	require.Equal(t, "budget_cutoff", next.json["reason"], next.text)
	require.Equal(t, 53.0, next.json["rank"], next.text)
	require.NotEqual(t, next.json["rank"], w.json["rank"], "a hidden item shares the rank of l.051: %s", w.text)
	require.Zero(t, b8f(w.json["rank"]), "a hidden item is never ranked (its record before the cutoff says rank 0): %s", w.text)
}

// TestBlackbox8ContradictionsAcrossTheCutoff: groups by state_key whose
// winner and loser sit on either side of the cutoff, or both after it;
// a winner hidden from the role or out of its window does not contradict;
// equal content agrees.
func TestBlackbox8ContradictionsAcrossTheCutoff(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("clash")
	items, keys := b8Ladder("l.", 80)
	add := func(it map[string]any) {
		items = append(items, it)
		keys = append(keys, b8Key{it["key"].(string), "project"})
	}
	// A: winner tried (policy, ranks first), loser far past the cutoff.
	add(map[string]any{"key": "a.win", "source": "human", "content": "The refund window is 30 days.", "state_key": "refund.window", "authority": "policy", "priority": 0})
	add(map[string]any{"key": "a.lose", "content": "The refund window is 14 days.", "state_key": "refund.window", "authority": "hypothesis", "priority": 0})
	// B: the loser ranks first (higher priority, lower confidence), the
	// winner (verified) past the cutoff.
	add(map[string]any{"key": "b.lose", "content": "Deploys happen on Mondays.", "state_key": "deploy.day", "priority": 9000, "confidence": "uncertain"})
	add(map[string]any{"key": "b.win", "content": "Deploys happen on Tuesdays.", "state_key": "deploy.day", "priority": 1, "confidence": "verified"})
	// C: both past the cutoff.
	add(map[string]any{"key": "c.win", "content": "The office is in Paris.", "state_key": "office", "priority": 2})
	add(map[string]any{"key": "c.lose", "content": "The office is in Lyon.", "state_key": "office", "priority": 2, "authority": "hypothesis"})
	// D: the winner (policy) is hidden from support: the visible one
	// (evidence, in the try zone) stands alone.
	add(map[string]any{"key": "d.win", "source": "human", "content": "Secret pricing is 9 EUR.", "state_key": "pricing", "authority": "policy", "priority": 9500, "roles": map[string]any{"hidden_from": []string{"support"}}})
	add(map[string]any{"key": "d.lose", "content": "Pricing is 12 EUR.", "state_key": "pricing", "priority": 9500})
	// E: the winner's window has closed.
	add(map[string]any{"key": "e.win", "source": "human", "content": "Support hours are 9-17.", "state_key": "hours", "authority": "policy", "priority": 9400, "valid_until": "2020-01-01T00:00:00Z"})
	add(map[string]any{"key": "e.lose", "content": "Support hours are 8-20.", "state_key": "hours", "priority": 9400})
	// F: equal content agrees (no contradiction).
	add(map[string]any{"key": "f.one", "source": "human", "content": "The API is versioned.", "state_key": "api", "authority": "policy", "priority": 9300})
	add(map[string]any{"key": "f.two", "content": "The API is versioned.", "state_key": "api", "priority": 9300})
	// G: a loser hidden from the role leaves no trace for it.
	add(map[string]any{"key": "g.win", "content": "Invoices are monthly.", "state_key": "invoices", "priority": 9200, "confidence": "verified"})
	add(map[string]any{"key": "g.lose", "content": "Invoices are weekly.", "state_key": "invoices", "priority": 9200, "confidence": "uncertain", "roles": map[string]any{"hidden_from": []string{"support"}}})
	e.batch("clash", items)
	hidden := func(k b8Key) bool { return k.key == "d.win" || k.key == "g.lose" }
	sup := e.agent("support", auth.ReadOnly, "clash")
	// Rank order: the policy items, then l.huge (the first miss), then the
	// evidence items of D, E, F, G and the ladder; B's loser is dropped.
	p := b8Assemble(t, e, "clash", sup, map[string]any{"target_role": "support", "token_budget": 260})
	require.NotNil(t, p.cutoff)
	recs := b8Check(t, e, "clash", sup, p, false)
	res := b8WhyAll(t, e, "clash", sup, p, recs, keys, hidden, false)
	label := func(k string) string { return b8WhyLabel(res.answers[b8Key{k, "project"}]) }
	rank := func(k string) int { return b8f(res.answers[b8Key{k, "project"}].json["rank"]) }

	require.Equal(t, "included", label("a.win"))
	require.Equal(t, "contradicted", label("a.lose"), "a loser past the cutoff still answers contradicted")
	require.Contains(t, p.rendered, "`a.win`")
	require.Contains(t, p.rendered, "`a.lose`", "the Active Contradictions line of a group met before the cutoff")
	require.NotContains(t, p.rendered, "- The refund window is 14 days.", "the loser is no entry")
	require.Equal(t, 1, strings.Count(p.rendered, "14 days"), "its content is only quoted in its contradiction line")

	require.Equal(t, "contradicted", label("b.lose"), "the loser is dropped even though its winner was never tried")
	require.NotContains(t, p.rendered, "Mondays")
	require.Equal(t, "budget_cutoff", label("b.win"))
	require.GreaterOrEqual(t, rank("b.win"), p.cutRank())

	require.Equal(t, "budget_cutoff", label("c.win"))
	require.Equal(t, "contradicted", label("c.lose"))
	require.Contains(t, res.answers[b8Key{"c.lose", "project"}].json["detail"], "c.win")

	require.Equal(t, "included", label("d.lose"), "a winner hidden from the role does not exist for it")
	require.Contains(t, p.rendered, "Pricing is 12 EUR.")
	require.NotContains(t, p.rendered, "`d.win`")
	require.NotContains(t, p.rendered, "Secret")
	require.Equal(t, "included", label("e.lose"), "a winner out of its window does not contradict")
	require.Equal(t, "not_candidate/not_valid", label("e.win"))
	require.Equal(t, "included", label("f.one"))
	require.Equal(t, "included", label("f.two"), "equal content agrees")
	require.Equal(t, "included", label("g.win"))
	require.NotContains(t, p.rendered, "`g.lose`", "no contradiction line names an item hidden from the role")
	require.NotContains(t, p.rendered, "weekly")

	// Every byte of the text is one record's span or scaffolding.
	a := e.do("POST", "/v1/projects/clash/packets/"+p.id+"/attribute", sup, map[string]any{"start": 0, "end": len(p.rendered)})
	require.Equal(t, 200, a.status, a.text)
	covered := make([]int, len(p.rendered))
	for _, m := range a.json["matches"].([]any) {
		mm := m.(map[string]any)
		for _, r := range mm["records"].([]any) {
			sp := r.(map[string]any)["span"].(map[string]any)
			for i := b8f(sp["start"]); i < b8f(sp["end"]); i++ {
				covered[i]++
			}
		}
		for _, s := range mm["scaffolding"].([]any) {
			sp := s.(map[string]any)
			for i := b8f(sp["start"]); i < b8f(sp["end"]); i++ {
				covered[i]++
			}
		}
	}
	for i, c := range covered {
		require.Equal(t, 1, c, "byte %d (%q) is covered %d times", i, p.rendered[i], c)
	}
	line := e.do("POST", "/v1/projects/clash/packets/"+p.id+"/attribute", sup, map[string]any{"text": "a.lose"})
	require.Equal(t, 200, line.status, line.text)
	require.Equal(t, "a.lose", line.json["matches"].([]any)[0].(map[string]any)["records"].([]any)[0].(map[string]any)["key"],
		"the contradiction line is the loser's record")
}

// TestBlackbox8SharedOverridesPastTheCutoff: a project item overrides the
// _shared item of its key wherever either ranks; an overridden _shared item
// never renders, even when the project item that overrides it is never
// tried; a project item hidden from the role does not override.
func TestBlackbox8SharedOverridesPastTheCutoff(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("layers")
	items, keys := b8Ladder("l.", 70)
	items = append(items,
		map[string]any{"key": "o.early", "content": "project early", "priority": 9000},   // shared one late
		map[string]any{"key": "o.late", "content": "project late", "priority": -50},      // shared one early
		map[string]any{"key": "o.both", "content": "project both late", "priority": -50}, // shared one late too
		map[string]any{"key": "o.hid", "content": "project hidden", "priority": 9000, "roles": map[string]any{"hidden_from": []string{"support"}}},
		map[string]any{"key": "o.hidlate", "content": "project hidden late", "priority": -50, "roles": map[string]any{"hidden_from": []string{"support"}}},
	)
	keys = append(keys, b8P("o.early", "o.both")...) // o.late (project) is asked in the bug test
	e.batch("layers", items)
	e.batch("_shared", []map[string]any{
		{"key": "o.early", "content": "shared late", "priority": -60},
		{"key": "o.late", "content": "shared early", "priority": 9100},
		{"key": "o.both", "content": "shared both late", "priority": -60},
		{"key": "o.hid", "content": "shared stands in for hidden", "priority": 9100},
		{"key": "o.hidlate", "content": "shared stands in for hidden late", "priority": -70},
		{"key": "sh.plain", "content": "shared plain late", "priority": -60},
	})
	keys = append(keys, b8S("o.early", "o.late", "o.both", "o.hid", "o.hidlate", "sh.plain")...)
	hidden := b8None
	sup := e.agent("support", auth.ReadOnly, "layers")
	p := b8Assemble(t, e, "layers", sup, map[string]any{"target_role": "support", "token_budget": 200})
	require.NotNil(t, p.cutoff)
	recs := b8Check(t, e, "layers", sup, p, false)
	res := b8WhyAllOf(t, e, "layers", sup, p, recs, keys, hidden, false, true)
	label := func(k b8Key) string { return b8WhyLabel(res.answers[k]) }

	require.Contains(t, p.rendered, "project early")
	require.Equal(t, "overridden", label(b8Key{"o.early", "shared"}), "past the cutoff, judged by why")
	require.Equal(t, "overridden", label(b8Key{"o.late", "shared"}), "met before its project item")
	require.NotContains(t, p.rendered, "shared early", "overridden although the project item was never tried")
	require.Equal(t, "budget_cutoff", label(b8Key{"o.both", "project"}))
	require.Equal(t, "overridden", label(b8Key{"o.both", "shared"}))
	require.Equal(t, "included", label(b8Key{"o.hid", "shared"}), "a hidden project item does not override for the role")
	require.Contains(t, p.rendered, "shared stands in for hidden")
	require.Equal(t, "budget_cutoff", label(b8Key{"o.hidlate", "shared"}))
	require.Equal(t, "budget_cutoff", label(b8Key{"sh.plain", "shared"}))
	require.Equal(t, 2, res.pastCut, "the untried overridden _shared items are counted in the cutoff")
	require.Equal(t, p.cutCount(), res.reasons["budget_cutoff"]+res.pastCut+1, "with o.late (project, see TestBlackbox8WhyLayer), every untried candidate is counted")
	// For the role the hidden project item does not exist: why answers the
	// _shared item it would have overridden, and never the hidden one.
	// (o.hidlate, whose _shared item is past the cutoff too: see the bug test.)
	w := e.do("GET", "/v1/projects/layers/packets/"+p.id+"/why?item=o.hid", sup, nil)
	require.Equal(t, 200, w.status, w.text)
	require.Equal(t, "shared", w.json["layer"], w.text)
	require.Equal(t, "included", w.json["decision"], w.text)
	require.NotContains(t, w.text, "project hidden")
	byKey := b8ItemRecords(recs)
	require.Equal(t, "overridden", byKey[b8Key{"o.late", "shared"}]["reason"])
	require.NotContains(t, byKey, b8Key{"o.late", "project"})
}

// TestBlackbox8WhyLayer: why?item=K answers for the item K of the asked
// layer (the project layer by default). It must not answer with the _shared
// item K's record when the project item K has none of its own:
// (1) the project item K ranks past the cutoff (it answers budget_cutoff);
// (2) for an admin, the project item K is hidden from the role and past the
// cutoff (hidden); (3) with no cutoff at all, the project item K did not
// fire (not_candidate, not_triggered) or is out of its window (not_valid);
// and (4) for the role, when the project item K is hidden from it, the
// _shared item K is answered (as a packet without a cutoff does), not 404.
func TestBlackbox8WhyLayer(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("layers2")
	items, _ := b8Ladder("l.", 70)
	items = append(items,
		map[string]any{"key": "o.late", "content": "project late", "priority": -50},
		map[string]any{"key": "o.hid", "content": "project hidden", "priority": -50, "roles": map[string]any{"hidden_from": []string{"support"}}},
		map[string]any{"key": "o.hidlate", "content": "project hidden late", "priority": -50, "roles": map[string]any{"hidden_from": []string{"support"}}},
		map[string]any{"key": "o.kw", "content": "project keyword", "trigger": map[string]any{"keywords": []string{"never-said"}}},
		map[string]any{"key": "o.expired", "content": "project expired", "valid_until": "2020-01-01T00:00:00Z"})
	e.batch("layers2", items)
	e.batch("_shared", []map[string]any{
		{"key": "o.late", "content": "shared early", "priority": 9100},
		{"key": "o.hid", "content": "shared for hidden", "priority": 9100},
		{"key": "o.hidlate", "content": "shared for hidden late", "priority": -70},
		{"key": "o.kw", "content": "shared always", "priority": 9100},
		{"key": "o.expired", "content": "shared always too", "priority": 9100}})
	sup := e.agent("support", auth.ReadOnly, "layers2")
	p := b8Assemble(t, e, "layers2", sup, map[string]any{"target_role": "support", "token_budget": 200})
	require.NotNil(t, p.cutoff)
	roomy := b8Assemble(t, e, "layers2", sup, map[string]any{"target_role": "support", "token_budget": 100000})
	require.Nil(t, roomy.cutoff)
	why := func(id, q, key string) resp {
		w := e.do("GET", "/v1/projects/layers2/packets/"+id+"/why?item="+q, key, nil)
		require.Equal(t, 200, w.status, "why?item=%s: %s", q, w.text)
		return w
	}
	for _, l := range []string{"", "&layer=project"} {
		w := why(p.id, "o.late"+l, e.admin) // (1)
		require.Equal(t, "project", w.json["layer"], "why?item=o.late%s: %s", l, w.text)
		require.Equal(t, "budget_cutoff", w.json["reason"], w.text)
		require.Equal(t, p.cutoff, w.json["cutoff"])
		w = why(p.id, "o.hid"+l, e.admin) // (2)
		require.Equal(t, "project", w.json["layer"], "why?item=o.hid%s: %s", l, w.text)
		require.Equal(t, "hidden", w.json["reason"], w.text)
		for _, id := range []string{p.id, roomy.id} { // (3)
			w = why(id, "o.kw"+l, sup)
			require.Equal(t, "not_candidate", w.json["decision"], "why?item=o.kw%s: %s", l, w.text)
			require.Equal(t, "not_triggered", w.json["reason"], w.text)
			w = why(id, "o.expired"+l, sup)
			require.Equal(t, "not_candidate", w.json["decision"], "why?item=o.expired%s: %s", l, w.text)
			require.Equal(t, "not_valid", w.json["reason"], w.text)
		}
	}
	// (4): the roomy packet answers the _shared item; so must the cut one.
	w := why(roomy.id, "o.hidlate", sup)
	require.Equal(t, "shared", w.json["layer"], w.text)
	w = why(p.id, "o.hidlate", sup)
	require.Equal(t, "shared", w.json["layer"], w.text)
	require.Equal(t, "budget_cutoff", w.json["reason"], w.text)
}

// TestBlackbox8PinsRankFirst: pinned items take the first ranks whatever
// their own rank fields, fit before anything else, and are tried once even
// when their natural place is past the cutoff; a pinned item hidden from
// the role, out of its window or deleted does not come in.
func TestBlackbox8PinsRankFirst(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("pins")
	items, keys := b8Ladder("l.", 80)
	items = append(items,
		map[string]any{"key": "p.only", "content": "pinned only item", "priority": -100, "authority": "hypothesis", "trigger": map[string]any{"pinned_only": true}},
		map[string]any{"key": "p.kw", "content": "pinned keyword item", "priority": -100, "trigger": map[string]any{"keywords": []string{"never-said"}}},
		map[string]any{"key": "p.restricted", "content": "pinned restricted", "priority": -100, "roles": map[string]any{"visible_to": []string{"support"}}},
		map[string]any{"key": "p.hidden", "content": "pinned secret", "priority": -100, "roles": map[string]any{"hidden_from": []string{"support"}}, "trigger": map[string]any{"pinned_only": true}},
		map[string]any{"key": "p.expired", "content": "pinned expired", "priority": -100, "valid_until": "2020-01-01T00:00:00Z", "trigger": map[string]any{"pinned_only": true}},
		map[string]any{"key": "p.gone", "content": "pinned gone", "priority": -100, "trigger": map[string]any{"pinned_only": true}},
		map[string]any{"key": "p.unpinned", "content": "pinned-only but not asked for", "priority": 99999, "trigger": map[string]any{"pinned_only": true}},
	)
	keys = append(keys, b8P("p.only", "p.kw", "p.restricted", "p.hidden", "p.expired", "p.gone", "p.unpinned")...)
	e.batch("pins", items)
	require.Equal(t, 200, e.do("DELETE", "/v1/projects/pins/items/p.gone", e.admin, nil).status)
	e.batch("_shared", []map[string]any{{"key": "p.shared", "content": "pinned shared", "priority": -100, "trigger": map[string]any{"pinned_only": true}}})
	keys = append(keys, b8S("p.shared")...)
	sup := e.agent("support", auth.ReadOnly, "pins")
	pins := []string{"l.070", "p.only", "p.kw", "p.restricted", "p.hidden", "p.expired", "p.gone", "p.shared", "l.000"}
	p := b8Assemble(t, e, "pins", sup, map[string]any{"target_role": "support", "token_budget": 200, "pins": pins})
	require.NotNil(t, p.cutoff)
	recs := b8Check(t, e, "pins", sup, p, false)
	hidden := func(k b8Key) bool { return k.key == "p.hidden" }
	res := b8WhyAll(t, e, "pins", sup, p, recs, keys, hidden, false)
	pinned := map[b8Key]bool{}
	for _, k := range append(b8P("l.070", "p.only", "p.kw", "p.restricted", "l.000"), b8S("p.shared")...) {
		pinned[k] = true
		w := res.answers[k]
		require.Equal(t, "included", b8WhyLabel(w), "%v: %s", k, w.text)
		require.Equal(t, "pin", w.json["rule"], "%v", k)
	}
	ranksOfPins := map[int]bool{}
	for k := range pinned {
		ranksOfPins[b8f(res.answers[k].json["rank"])] = true
	}
	for i := 1; i <= len(pinned); i++ {
		require.True(t, ranksOfPins[i], "pins take ranks 1..%d", len(pinned))
	}
	require.Equal(t, float64(len(pinned)+1), b8ItemRecords(recs)[b8Key{"l.huge", "project"}]["rank"], "the first unpinned candidate follows the pins")
	require.Equal(t, "not_candidate/not_valid", b8WhyLabel(res.answers[b8Key{"p.expired", "project"}]))
	require.Equal(t, "not_candidate/tombstoned", b8WhyLabel(res.answers[b8Key{"p.gone", "project"}]))
	require.Equal(t, "not_candidate/not_triggered", b8WhyLabel(res.answers[b8Key{"p.unpinned", "project"}]))
	require.NotContains(t, p.rendered, "secret")
	require.Equal(t, 1, strings.Count(p.rendered, "ladder step 70\n"), "a pinned item is rendered once")
	// Visible candidates: 6 pins + huge + 80 ladder − 2 ladder items already pinned.
	require.Equal(t, 6+1+80-2, p.cutRank()-1+p.cutCount(), "pinned items are not counted twice")
	a := e.do("GET", "/v1/projects/pins/packets/"+p.id+"/why?item=p.hidden", e.admin, nil)
	require.Equal(t, "hidden", a.json["reason"], a.text)
}

// TestBlackbox8InviolableRequestParts: a task text larger than the budget is
// rendered whole; every item is excluded for budget (32 tried, the rest cut);
// used is the exact count of the text and exceeds the budget only by the
// request parts.
func TestBlackbox8InviolableRequestParts(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("task")
	items, keys := b8Ladder("l.", 60)
	e.batch("task", items)
	sup := e.agent("support", auth.ReadOnly, "task")
	objective := strings.Repeat("Reconcile the ledger for every account and report each difference. ", 12)
	for _, budget := range []int{0, 10, 60} {
		body := map[string]any{"target_role": "support", "token_budget": budget,
			"task":                map[string]any{"task_id": "T-big", "objective": objective},
			"acceptance_criteria": []any{map[string]any{"id": "AC1", "description": "Every account is reconciled.", "verification_kind": "gate", "required": true}}}
		r := e.do("POST", "/v1/projects/task/packets", sup, body)
		if budget == 0 {
			// token_budget 0 is either refused or the default; never a packet of 0.
			if r.status == 201 {
				require.Equal(t, 16000.0, r.json["budget"].(map[string]any)["allocated"], r.text)
			} else {
				require.Equal(t, 422, r.status, r.text)
			}
			continue
		}
		p := b8Assemble(t, e, "task", sup, body)
		require.Contains(t, p.rendered, strings.TrimSpace(objective), "the objective is never cut")
		require.Contains(t, p.rendered, "Every account is reconciled.")
		require.Greater(t, b8f(p.budget["used"]), budget)
		gaps := p.budget["unresolved_gaps"].([]any)
		require.Equal(t, "budget_exceeded_by_inviolable", gaps[0].(map[string]any)["reason"], "the inviolable gap comes first")
		recs := b8Check(t, e, "task", sup, p, false)
		for _, r := range recs {
			if r["subject"] == "item" {
				require.Equal(t, "budget", r["reason"], "no item fits: %v", r["key"])
			} else {
				require.Equal(t, "included", r["decision"], "request parts are inviolable: %v", r["key"])
			}
		}
		require.NotNil(t, p.cutoff)
		require.Equal(t, float64(b8Tries+2), p.cutoff["rank"])
		require.Equal(t, 61-(b8Tries+1), p.cutCount())
		require.Equal(t, float64(b8f(p.budget["headroom"])), p.cutoff["headroom"])
		res := b8WhyAll(t, e, "task", sup, p, recs, keys, b8None, false)
		require.Equal(t, b8Tries+1, res.reasons["budget"])
		require.Equal(t, p.cutCount(), res.reasons["budget_cutoff"])
	}
}

// TestBlackbox8ValidityAndCounter: windows, roles, deletes, revivals and
// trigger changes through PUT and batch keep the untried count exact: the
// candidates past the cutoff are exactly those why answers budget_cutoff
// for, for two roles, in both layers.
func TestBlackbox8ValidityAndCounter(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("churn")
	items, keys := b8Ladder("l.", 100)
	items = append(items,
		map[string]any{"key": "w.open", "content": "window holds", "valid_from": "2020-01-01T00:00:00Z", "valid_until": "2100-01-01T00:00:00Z", "priority": 4795},
		map[string]any{"key": "w.open.late", "content": "window holds late", "valid_from": "2020-01-01T00:00:00Z", "priority": -5},
		map[string]any{"key": "w.expired", "content": "window closed", "valid_until": "2020-01-01T00:00:00Z", "priority": 4785},
		map[string]any{"key": "w.future", "content": "window ahead", "valid_from": "2100-01-01T00:00:00Z", "priority": -5},
		map[string]any{"key": "r.support", "content": "only support", "roles": map[string]any{"visible_to": []string{"support"}}, "priority": -5},
		map[string]any{"key": "r.critic", "content": "only critic", "roles": map[string]any{"visible_to": []string{"critic"}}, "priority": -5},
	)
	keys = append(keys, b8P("w.open", "w.open.late", "w.expired", "w.future", "r.support", "r.critic")...)
	e.batch("churn", items)
	put := func(k string, body map[string]any) {
		r := e.do("PUT", "/v1/projects/churn/items/"+k, e.admin, body)
		require.Contains(t, []int{200, 201}, r.status, r.text)
	}
	del := func(k string) {
		require.Equal(t, 200, e.do("DELETE", "/v1/projects/churn/items/"+k, e.admin, nil).status)
	}
	for i := 50; i < 60; i++ {
		del(fmt.Sprintf("l.%03d", i))
	}
	put("l.055", map[string]any{"content": "revived by PUT", "priority": 4450})
	e.batch("churn", []map[string]any{{"key": "l.056", "content": "revived by batch", "priority": 4440},
		{"key": "l.064", "content": "now a keyword item", "priority": 4360, "trigger": map[string]any{"keywords": []string{"zzz"}}}})
	put("l.060", map[string]any{"content": "now a keyword item", "priority": 4400, "trigger": map[string]any{"keywords": []string{"zzz"}}})
	put("l.061", map[string]any{"content": "now pinned only", "priority": 4390, "trigger": map[string]any{"pinned_only": true}})
	put("l.062", map[string]any{"content": "now hidden", "priority": 4380, "roles": map[string]any{"hidden_from": []string{"support"}}})
	put("l.063", map[string]any{"content": "now expired", "priority": 4370, "valid_until": "2020-01-01T00:00:00Z"})
	put("l.065", map[string]any{"content": "hidden then deleted", "priority": 4350, "roles": map[string]any{"hidden_from": []string{"support"}}})
	del("l.065")
	put("l.066", map[string]any{"content": "hidden then open again", "priority": 4340, "roles": map[string]any{"hidden_from": []string{"support"}}})
	put("l.066", map[string]any{"content": "open again", "priority": 4340})
	put("l.067", map[string]any{"content": "windowed then open", "priority": 4330, "valid_until": "2100-01-01T00:00:00Z"})
	put("l.067", map[string]any{"content": "open after window", "priority": 4330})
	put("l.068", map[string]any{"content": "keyword then always", "priority": 4320, "trigger": map[string]any{"keywords": []string{"zzz"}}})
	put("l.068", map[string]any{"content": "always again", "priority": 4320})
	e.batch("_shared", []map[string]any{
		{"key": "s.a", "content": "shared open", "priority": 4795},
		{"key": "s.b", "content": "shared late", "priority": -10},
		{"key": "s.c", "content": "shared critic", "priority": -10, "roles": map[string]any{"visible_to": []string{"critic"}}},
		{"key": "s.d", "content": "shared deleted", "priority": -10},
	})
	require.Equal(t, 200, e.do("DELETE", "/v1/projects/_shared/items/s.d", e.admin, nil).status)
	keys = append(keys, b8S("s.a", "s.b", "s.c", "s.d")...)
	hiddenFor := map[string]map[string]bool{
		"support": {"project:r.critic": true, "shared:s.c": true, "project:l.062": true, "project:l.065": true},
		"critic":  {"project:r.support": true},
	}
	for role, hid := range hiddenFor {
		key := e.agent(role, auth.ReadOnly, "churn")
		hidden := func(k b8Key) bool { return hid[k.String()] }
		p := b8Assemble(t, e, "churn", key, map[string]any{"target_role": role, "token_budget": 200})
		require.NotNil(t, p.cutoff, role)
		recs := b8Check(t, e, "churn", key, p, false)
		res := b8WhyAll(t, e, "churn", key, p, recs, keys, hidden, false)
		require.Equal(t, p.cutCount(), res.reasons["budget_cutoff"], role)
		require.Equal(t, "budget_cutoff", b8WhyLabel(res.answers[b8Key{"w.open.late", "project"}]), role)
		require.Equal(t, "not_candidate/not_valid", b8WhyLabel(res.answers[b8Key{"w.expired", "project"}]), role)
		require.Equal(t, "not_candidate/not_valid", b8WhyLabel(res.answers[b8Key{"w.future", "project"}]), role)
		require.Equal(t, "not_candidate/not_valid", b8WhyLabel(res.answers[b8Key{"l.063", "project"}]), role)
		require.Equal(t, "not_candidate/tombstoned", b8WhyLabel(res.answers[b8Key{"l.050", "project"}]), role)
		require.Equal(t, "not_candidate/tombstoned", b8WhyLabel(res.answers[b8Key{"s.d", "shared"}]), role)
		require.Equal(t, "not_candidate/not_triggered", b8WhyLabel(res.answers[b8Key{"l.060", "project"}]), role)
		require.Equal(t, "budget_cutoff", b8WhyLabel(res.answers[b8Key{"l.068", "project"}]), role)
		require.Equal(t, "included", b8WhyLabel(res.answers[b8Key{"w.open", "project"}]), "%s: an open window in the try zone", role)
	}
}

// TestBlackbox8LanesPastTheCutoff: keyword (said by a person only), tool
// and template items past the cutoff are counted and answer budget_cutoff,
// a keyword only an agent or the library said does not fire at all, and a
// template without its value answers template_unresolved wherever it ranks.
func TestBlackbox8LanesPastTheCutoff(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("lanes")
	items, keys := b8Ladder("l.", 60)
	items = append(items,
		map[string]any{"key": "k.person", "content": "refunds take 5 days", "priority": -10, "trigger": map[string]any{"keywords": []string{"refund"}}},
		map[string]any{"key": "k.person.early", "content": "refunds need approval", "priority": 20000, "trigger": map[string]any{"keywords": []string{"refund"}}},
		map[string]any{"key": "k.agent", "content": "deploys freeze Fridays", "priority": 20000, "trigger": map[string]any{"keywords": []string{"deploy"}}},
		map[string]any{"key": "k.library", "content": "invoices monthly", "priority": 20000, "trigger": map[string]any{"keywords": []string{"invoice"}}},
		map[string]any{"key": "t.late", "title": "lookup_order", "content": "Look up an order.", "kind": "tool", "slot": "tools", "priority": -10, "trigger": map[string]any{"tool": "lookup_order"}},
		map[string]any{"key": "t.early", "title": "lookup_order", "content": "Order ids are numeric.", "kind": "tool", "slot": "tools", "priority": 20000, "trigger": map[string]any{"tool": "lookup_order"}},
		map[string]any{"key": "t.other", "title": "other_tool", "content": "Another tool.", "kind": "tool", "slot": "tools", "priority": 20000, "trigger": map[string]any{"tool": "other_tool"}},
		map[string]any{"key": "tp.filled.late", "content": "The customer is {{customer}}.", "template": true, "priority": -10},
		map[string]any{"key": "tp.hole.late", "content": "Order {{order_id}} shipped.", "template": true, "priority": -10},
		map[string]any{"key": "tp.hole.early", "content": "Ticket {{ticket}} open.", "template": true, "priority": 20000},
		map[string]any{"key": "tp.filled.early", "content": "Hello {{customer}}.", "template": true, "priority": 20000},
	)
	keys = append(keys, b8P("k.person", "k.person.early", "k.agent", "k.library", "t.late", "t.early", "t.other", "tp.filled.late", "tp.hole.late", "tp.hole.early", "tp.filled.early")...)
	e.batch("lanes", items)
	sup := e.agent("support", auth.ReadOnly, "lanes")
	for _, f := range []string{"markdown", "blocks", "json"} {
		p := b8Assemble(t, e, "lanes", sup, map[string]any{"target_role": "support", "token_budget": 260, "format": f,
			"history": []any{
				map[string]any{"role": "user", "author": "person", "content": "Where is my refund?"},
				map[string]any{"role": "assistant", "author": "agent", "content": "Let me check the deploy."},
				map[string]any{"role": "system", "author": "library", "content": "Summary: an invoice question."},
			},
			"tool_results": []any{map[string]any{"tool": "lookup_order", "status": "ok", "content": "{\"id\":7}"}},
			"variables":    map[string]any{"customer": "Ada"}})
		require.NotNil(t, p.cutoff, f)
		recs := b8Check(t, e, "lanes", sup, p, false)
		var res b8WhyResult
		if f == "markdown" {
			res = b8WhyAll(t, e, "lanes", sup, p, recs, keys, b8None, false)
		} else {
			res = b8WhyAllOf(t, e, "lanes", sup, p, recs, keys[len(keys)-11:], b8None, false, true)
		}
		label := func(k string) string { return b8WhyLabel(res.answers[b8Key{k, "project"}]) }
		require.Equal(t, "included", label("k.person.early"), f)
		require.Equal(t, `keyword:"refund"@history[0]`, res.answers[b8Key{"k.person.early", "project"}].json["rule"])
		require.Equal(t, "budget_cutoff", label("k.person"), f)
		require.Equal(t, `keyword:"refund"@history[0]`, res.answers[b8Key{"k.person", "project"}].json["rule"], "past the cutoff why still names the rule that fired")
		require.Equal(t, "not_candidate/not_triggered", label("k.agent"), "%s: only what a person said fires", f)
		require.Equal(t, "not_candidate/not_triggered", label("k.library"), f)
		require.Equal(t, "included", label("t.early"), f)
		require.Equal(t, "tool:lookup_order", res.answers[b8Key{"t.early", "project"}].json["rule"])
		require.Equal(t, "budget_cutoff", label("t.late"), f)
		require.Equal(t, "not_candidate/not_triggered", label("t.other"), f)
		require.Equal(t, "included", label("tp.filled.early"), f)
		require.Contains(t, p.rendered, "Hello Ada.")
		require.Equal(t, "template_unresolved", label("tp.hole.early"), f)
		require.Equal(t, "budget_cutoff", label("tp.filled.late"), f)
		require.Equal(t, "template_unresolved", label("tp.hole.late"), "%s: a stage's reason first", f)
		require.Equal(t, 1, res.pastCut, "%s: the late template without a value is counted, not judged", f)
		require.NotContains(t, p.rendered, "Ticket")
		require.NotContains(t, p.rendered, "Fridays")
	}
}

// TestBlackbox8FormatsAndTokenizers: every format under both tokenizers,
// with and without a cutoff: used is the exact count of the text under the
// packet's tokenizer, spans hold, the json format stays valid JSON, and each
// packet replays byte for byte.
func TestBlackbox8FormatsAndTokenizers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("fmt")
	var items []map[string]any
	var keys []b8Key
	kinds := []string{"knowledge", "state", "skill", "decision", "instruction", "episode", "evidence"}
	for i := range 90 {
		k := fmt.Sprintf("f.%03d", i)
		items = append(items, map[string]any{"key": k, "title": fmt.Sprintf("Título %d", i), "kind": kinds[i%len(kinds)],
			"content": fmt.Sprintf("Fact %d — ünïcødé ✓ \"quoted\" <tag> & %s", i, strings.Repeat("mot ", i%11)), "priority": 500 - i})
		keys = append(keys, b8Key{k, "project"})
	}
	items = append(items, map[string]any{"key": "tool.x", "title": "lookup_x", "kind": "tool", "slot": "tools", "content": "Look up X.", "trigger": map[string]any{"tool": "lookup_x"}, "priority": -1})
	keys = append(keys, b8P("tool.x")...)
	e.batch("fmt", items)
	e.batch("_shared", []map[string]any{{"key": "sh.1", "content": "Shared ✓ default", "priority": 450}})
	keys = append(keys, b8S("sh.1")...)
	sup := e.agent("support", auth.ReadOnly, "fmt")
	texts := map[string]string{}
	for _, tk := range []string{"o200k_base", "cl100k_base"} {
		for _, f := range []string{"markdown", "blocks", "json"} {
			for _, budget := range []int{300, 50000} { // 250 and 260 trip TestBlackbox8TriesCountFromTheFirstExclusion
				body := map[string]any{"target_role": "support", "token_budget": budget, "format": f, "tokenizer": tk,
					"task":          map[string]any{"objective": "Answer in one sentence ✓."},
					"tool_results":  []any{map[string]any{"tool": "lookup_x", "status": "ok", "content": "{}"}},
					"agent_context": map[string]any{"channel": "email"}}
				p := b8Assemble(t, e, "fmt", sup, body)
				require.Equal(t, f, p.r.json["format"])
				require.Equal(t, tk, p.r.json["tokenizer"])
				if budget == 300 {
					require.NotNil(t, p.cutoff, "%s/%s", tk, f)
				} else {
					require.Nil(t, p.cutoff, "%s/%s", tk, f)
				}
				if f == "json" {
					require.True(t, json.Valid([]byte(p.rendered)), "%s/%d: the json format is JSON:\n%s", tk, budget, p.rendered)
				}
				texts[fmt.Sprint(f, "/", tk, "/", budget)] = p.rendered
				recs := b8Check(t, e, "fmt", sup, p, false)
				if budget == 300 && (f == "json") == (tk == "cl100k_base") && f != "markdown" {
					b8WhyAll(t, e, "fmt", sup, p, recs, keys, b8None, false)
				}
			}
		}
	}
	for _, f := range []string{"markdown", "blocks", "json"} {
		require.Equal(t, texts[f+"/o200k_base/50000"], texts[f+"/cl100k_base/50000"], "%s: the tokenizer counts, it does not change a text that fits whole", f)
		require.NotEqual(t, texts[f+"/o200k_base/300"], texts[f+"/o200k_base/50000"], f)
	}
	require.NotEqual(t, texts["markdown/o200k_base/300"], texts["blocks/o200k_base/300"])
	require.NotEqual(t, texts["json/o200k_base/300"], texts["blocks/o200k_base/300"])
}

// b8Score parses the score out of a rule "relevance:0.42".
func b8Score(t *testing.T, rule any) float64 {
	t.Helper()
	s, ok := rule.(string)
	require.True(t, ok && strings.HasPrefix(s, "relevance:"), "rule %v", rule)
	v, err := strconv.ParseFloat(strings.TrimPrefix(s, "relevance:"), 64)
	require.NoError(t, err, s)
	return v
}

// TestBlackbox8RelevanceHiddenDoNotCrowdOut: 60 items hidden from the role,
// 60 visible only to another role and 60 out of their window, all matching
// the query strongly, must not take the 50 places of a few weakly matching
// visible items; for a role that may see the strong ones, they do take them.
func TestBlackbox8RelevanceHiddenDoNotCrowdOut(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("crowd")
	var items []map[string]any
	var keys []b8Key
	var filler []string
	for i := range 70 {
		filler = append(filler, fmt.Sprintf("kq%c%c", "bcdfghjklmnpqrstvwxz"[i/20], "bcdfghjklmnpqrstvwxz"[i%20]))
	}
	for i := range 60 {
		items = append(items,
			map[string]any{"key": fmt.Sprintf("a.hid.%03d", i), "content": "zebra zebra zebra", "trigger": map[string]any{"relevance": true}, "roles": map[string]any{"hidden_from": []string{"support"}}},
			map[string]any{"key": fmt.Sprintf("a.crit.%03d", i), "content": "zebra zebra zebra", "trigger": map[string]any{"relevance": true}, "roles": map[string]any{"visible_to": []string{"critic"}}},
			map[string]any{"key": fmt.Sprintf("a.exp.%03d", i), "content": "zebra zebra zebra", "trigger": map[string]any{"relevance": true}, "valid_until": "2020-01-01T00:00:00Z"})
	}
	for i := range 5 {
		// zebra once among 64 other lexemes: weight 1000/(1+1+1) = 333.
		k := fmt.Sprintf("v.%03d", i)
		items = append(items, map[string]any{"key": k, "content": "zebra " + strings.Join(filler[:64], " "), "trigger": map[string]any{"relevance": true}})
		keys = append(keys, b8Key{k, "project"})
	}
	items = append(items, map[string]any{"key": "v.window", "content": "zebra", "trigger": map[string]any{"relevance": true}, "valid_from": "2020-01-01T00:00:00Z"})
	keys = append(keys, b8P("v.window")...)
	e.batch("crowd", items)
	var lex int
	require.NoError(t, e.pool.QueryRow(t.Context(), "SELECT length(to_tsvector('english', $1))", "zebra "+strings.Join(filler[:64], " ")).Scan(&lex))
	require.Equal(t, 65, lex, "the test's vocabulary stems to distinct lexemes")

	sup := e.agent("support", auth.ReadOnly, "crowd")
	for _, viewer := range []string{sup, e.admin} {
		p := b8Assemble(t, e, "crowd", viewer, map[string]any{"target_role": "support", "query": "zebra"})
		recs := b8Check(t, e, "crowd", viewer, p, viewer == e.admin)
		res := b8WhyAll(t, e, "crowd", viewer, p, recs, keys, b8None, viewer == e.admin)
		require.Equal(t, 6, res.reasons["included"], "every visible match fires")
		for i := range 5 {
			w := res.answers[b8Key{fmt.Sprintf("v.%03d", i), "project"}]
			require.InDelta(t, 0.333, b8Score(t, w.json["rule"]), 0.0051, w.text)
		}
		require.InDelta(t, 0.5, b8Score(t, res.answers[b8Key{"v.window", "project"}].json["rule"]), 1e-9)
		require.NotContains(t, p.rendered, "zebra zebra")
		for _, r := range recs {
			require.NotContains(t, r["key"], "a.", "no record of the hidden or expired matches: %v", r)
		}
	}
	crit := e.agent("critic", auth.ReadOnly, "crowd")
	p := b8Assemble(t, e, "crowd", crit, map[string]any{"target_role": "critic", "query": "zebra"})
	recs := b8Check(t, e, "crowd", crit, p, false)
	fired := map[string]bool{}
	for _, r := range recs {
		if r["subject"] == "item" {
			fired[r["key"].(string)] = true
			require.InDelta(t, 0.75, b8Score(t, r["rule"]), 1e-9, "%v", r)
		}
	}
	require.Len(t, fired, 50, "the top 50 by score")
	for i := range 50 {
		require.True(t, fired[fmt.Sprintf("a.crit.%03d", i)] || fired[fmt.Sprintf("a.hid.%03d", i)])
	}
	// By score then key: a.crit.* sort before a.hid.*, so a.crit.000..049.
	for i := range 50 {
		require.True(t, fired[fmt.Sprintf("a.crit.%03d", i)], "a.crit.%03d (key order among equal scores)", i)
	}
	w := b8Why(t, e, "crowd", crit, p.id, b8Key{"v.000", "project"})
	require.Equal(t, "not_candidate", w.json["decision"], w.text)
	require.Equal(t, "not_triggered", w.json["reason"], w.text)
}

// TestBlackbox8RelevanceScore: the documented score — per lexeme a weight
// 1000·tf/(tf+1+⌊lexemes/64⌋), summed over the query's lexemes (at most 32,
// in byte order) and divided by 1000 × lexemes; the top 50 by score then key
// then layer, from lists of 50 per layer.
func TestBlackbox8RelevanceScore(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("score")
	var words []string
	const abc = "bcdfghjklmnpqrstvwxz"
	for i := range 200 {
		words = append(words, fmt.Sprintf("kq%c%c%c", abc[i/400%20], abc[i/20%20], abc[i%20]))
	}
	rel := map[string]any{"relevance": true}
	e.batch("score", []map[string]any{
		{"key": "one", "content": "zebra", "trigger": rel},
		{"key": "three", "content": "zebra zebra zebra", "trigger": rel},
		{"key": "pair", "content": "zebra lion", "trigger": rel},
		{"key": "long65", "content": "zebra " + strings.Join(words[100:164], " "), "trigger": rel},
		{"key": "long128", "content": "zebra zebra " + strings.Join(words[:127], " "), "trigger": rel},
		{"key": "lion.only", "content": "lion lion", "trigger": rel},
		{"key": "first.word", "content": words[0], "trigger": rel},
		{"key": "word31", "content": words[31], "trigger": rel},
		{"key": "word39", "content": words[39], "trigger": rel},
		{"key": "not.relevance", "content": "zebra zebra zebra", "trigger": map[string]any{"keywords": []string{"nothing-said"}}},
	})
	for _, c := range []struct {
		text string
		n    int
	}{{"zebra " + strings.Join(words[100:164], " "), 65}, {"zebra zebra " + strings.Join(words[:127], " "), 128}, {strings.Join(words[:40], " "), 40}} {
		var lex int
		require.NoError(t, e.pool.QueryRow(t.Context(), "SELECT length(to_tsvector('english', $1))", c.text).Scan(&lex))
		require.Equal(t, c.n, lex, "the test's vocabulary stems to distinct lexemes")
	}
	sup := e.agent("support", auth.ReadOnly, "score")
	for _, c := range []struct {
		query string
		want  map[string]float64 // key → score; absent keys must not fire
	}{
		{"zebra", map[string]float64{"one": 0.5, "three": 0.75, "pair": 0.5, "long65": 0.333, "long128": 0.4}},
		{"zebra lion", map[string]float64{"one": 0.25, "three": 0.375, "pair": 0.5, "long65": 0.1665, "long128": 0.2, "lion.only": 0.3335}},
		{"Zebras!", map[string]float64{"one": 0.5, "three": 0.75, "pair": 0.5, "long65": 0.333, "long128": 0.4}},
		// 40 lexemes: only the first 32 in byte order count, over 32 000.
		{strings.Join(words[:40], " "), map[string]float64{"first.word": 500.0 / 32000, "word31": 500.0 / 32000, "long128": 500.0 / 32000 * 32}},
	} {
		// long128 holds words[0..126] once each (weight 1000/(1+1+2)=250), so
		// for the 40-word query its score is 32·250/32000 = 0.25.
		if c.query == strings.Join(words[:40], " ") {
			c.want["long128"] = 0.25
		}
		p := b8Assemble(t, e, "score", sup, map[string]any{"target_role": "support", "query": c.query})
		recs := b8Check(t, e, "score", sup, p, false)
		got := map[string]float64{}
		for _, r := range recs {
			if r["subject"] == "item" {
				got[r["key"].(string)] = b8Score(t, r["rule"])
				require.Equal(t, "included", r["decision"])
			}
		}
		require.Len(t, got, len(c.want), "query %q fired %v", c.query, got)
		for k, want := range c.want {
			require.Contains(t, got, k, "query %q", c.query)
			require.InDelta(t, want, got[k], 0.0051, "query %q, %s", c.query, k)
		}
	}

	// Per layer: 40 project items at 0.5 and 40 _shared items at 0.75 → the
	// 40 _shared and the 10 project items first by key.
	e.project("layered")
	var proj, shared []map[string]any
	for i := range 40 {
		proj = append(proj, map[string]any{"key": fmt.Sprintf("p.%03d", i), "content": "okapi", "trigger": rel})
		shared = append(shared, map[string]any{"key": fmt.Sprintf("s.%03d", i), "content": "okapi okapi okapi", "trigger": rel})
	}
	e.batch("layered", proj)
	e.batch("_shared", shared)
	sup2 := e.agent("support", auth.ReadOnly, "layered")
	p := b8Assemble(t, e, "layered", sup2, map[string]any{"target_role": "support", "query": "okapi"})
	recs := b8Check(t, e, "layered", sup2, p, false)
	fired := map[string]bool{}
	for _, r := range recs {
		if r["subject"] == "item" {
			fired[b8Layer(r)+":"+r["key"].(string)] = true
		}
	}
	require.Len(t, fired, 50)
	for i := range 40 {
		require.True(t, fired[fmt.Sprintf("shared:s.%03d", i)], "s.%03d", i)
		require.Equal(t, i < 10, fired[fmt.Sprintf("project:p.%03d", i)], "p.%03d", i)
	}
}

// TestBlackbox8PipelineVersions: new packets store pipeline 2 (checked by
// b8Check for every packet of this file); a packet stored as pipeline 1 (a
// copy of a row, as a packet made before the migration would be) replays
// with pipeline 1's code — every candidate tried — so where the pipelines
// differ the replay says so, and where they agree it is identical.
func TestBlackbox8PipelineVersions(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("pipe")
	items := []map[string]any{{"key": "l.huge", "content": strings.Repeat("word ", 400), "priority": 10000}}
	for i := range 45 {
		items = append(items, map[string]any{"key": fmt.Sprintf("l.%03d", i), "content": "tiny", "priority": 5000 - i})
	}
	e.batch("pipe", items)
	copyAsV1 := func(id string) string {
		forged := id + "p1"
		_, err := e.pool.Exec(t.Context(), `INSERT INTO packets SELECT (jsonb_populate_record(p, jsonb_build_object('id', $2::text, 'pipeline', 1, 'budget_cutoff', null, 'gaps_more', 0))).* FROM packets p WHERE id = $1`, id, forged)
		require.NoError(t, err)
		_, err = e.pool.Exec(t.Context(), `INSERT INTO packet_records SELECT (jsonb_populate_record(r, jsonb_build_object('packet_id', $2::text))).* FROM packet_records r WHERE packet_id = $1`, id, forged)
		require.NoError(t, err)
		return forged
	}
	// With a cutoff, pipeline 1 would have tried (and fitted) the small
	// items after the 32 tries.
	cut := b8Assemble(t, e, "pipe", e.admin, map[string]any{"target_role": "support", "token_budget": 200})
	require.NotNil(t, cut.cutoff)
	b8Check(t, e, "pipe", e.admin, cut, true)
	v1 := copyAsV1(cut.id)
	rp := e.do("POST", "/v1/projects/pipe/packets/"+v1+"/replay", e.admin, nil)
	require.Equal(t, 200, rp.status, rp.text)
	require.Equal(t, false, rp.json["identical"], "a pipeline-1 packet replays with pipeline 1: %s", rp.text)
	require.Equal(t, cut.r.json["rendered_sha256"], rp.json["rendered_sha256_then"])
	require.NotEmpty(t, rp.json["differences"])
	require.Contains(t, rp.text, `"subject":"item:pipe/l.032"`, "pipeline 1 tries past the 32")
	require.NotEqual(t, rp.json["rendered_sha256_then"], rp.json["rendered_sha256_now"], "pipeline 1 fits the small items past the cutoff")
	// The pipeline-2 packet itself still replays identically.
	rp = e.do("POST", "/v1/projects/pipe/packets/"+cut.id+"/replay", e.admin, nil)
	require.Equal(t, true, rp.json["identical"], rp.text)

	// Without a cutoff and without relevance both pipelines agree.
	all := b8Assemble(t, e, "pipe", e.admin, map[string]any{"target_role": "support", "token_budget": 100000})
	require.Nil(t, all.cutoff)
	v1 = copyAsV1(all.id)
	rp = e.do("POST", "/v1/projects/pipe/packets/"+v1+"/replay", e.admin, nil)
	require.Equal(t, 200, rp.status, rp.text)
	require.Equal(t, true, rp.json["identical"], rp.text)
	require.Empty(t, rp.json["differences"])
	g := e.do("GET", "/v1/projects/pipe/packets/"+v1, e.admin, nil)
	require.Equal(t, 200, g.status, g.text)
	require.NotContains(t, g.json["budget"], "cutoff")
}

// TestBlackbox8AnswerSize: over a project of 3,000 always-on items a packet
// with a cutoff answers no more than twice its text plus 16 KB, stored and
// fresh, and its records stay bounded by what was tried.
func TestBlackbox8AnswerSize(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("huge")
	var items []map[string]any
	for i := range 3000 {
		it := map[string]any{"key": fmt.Sprintf("h.%04d", i), "content": b8Filler(i, 4+i%5), "priority": i % 17, "title": fmt.Sprintf("Item %d", i)}
		if i%9 == 0 {
			it["roles"] = map[string]any{"hidden_from": []string{"support"}}
		}
		items = append(items, it)
	}
	e.batch("huge", items)
	sup := e.agent("support", auth.ReadOnly, "huge")
	for _, budget := range []int{300, 4000} {
		for _, viewer := range []string{sup, e.admin} {
			p := b8Assemble(t, e, "huge", viewer, map[string]any{"target_role": "support", "token_budget": budget})
			require.NotNil(t, p.cutoff)
			require.LessOrEqual(t, len(p.r.text), 2*len(p.rendered)+16<<10, "answer %d bytes, text %d", len(p.r.text), len(p.rendered))
			g := e.do("GET", "/v1/projects/huge/packets/"+p.id, viewer, nil)
			require.LessOrEqual(t, len(g.text), 2*len(p.rendered)+16<<10)
			recs := b8Check(t, e, "huge", viewer, p, viewer == e.admin)
			require.Less(t, len(recs), p.cutRank()+200, "records are bounded by the tries, not the project")
			require.Equal(t, 3000-334, p.cutRank()-1+p.cutCount())
			require.Len(t, p.budget["unresolved_gaps"], 20)
			require.Equal(t, float64(b8Tries+1+p.cutCount()-20), p.budget["unresolved_gaps_more"])
		}
	}
}

// TestBlackbox8BudgetDoesNotChangeJudgement: over a random world of every
// trigger, both layers, overrides, contradictions, roles, windows and
// templates, a cutting budget and a roomy one give every item the same
// verdict except for the budget: not_candidate and stage reasons are equal;
// what the roomy packet included is included, budget or budget_cutoff in the
// cutting one, with the same rank before the cutoff.
// b8DiffWorld writes one world of TestBlackbox8BudgetDoesNotChangeJudgement:
// both layers with every trigger, overrides, hidden items, state keys,
// templates and windows. It returns every key and the hidden ones.
func b8DiffWorld(t *testing.T, e *env, rng *rand.Rand, proj string, words []string, text func(int) string, sharedSoFar *[]b8Key) ([]b8Key, map[b8Key]bool) {
	t.Helper()
	keys := append([]b8Key(nil), (*sharedSoFar)...)
	hid := map[b8Key]bool{}
	prio := map[b8Key]int{}
	var plain []string // always-on, visible, open project items: the ones a _shared item overrides
	for _, layer := range []string{proj, "_shared"} {
		var items []map[string]any
		seen := map[string]bool{}
		for i := range 70 {
			key := fmt.Sprintf("%s.k%03d", proj, i)
			lname := "project"
			if layer == "_shared" {
				lname = "shared"
				key = fmt.Sprintf("%s.s%03d", proj, i)
				if rng.IntN(3) == 0 && len(plain) > 0 {
					// An override. (An override of a project item that is no
					// candidate is TestBlackbox8WhyLayer.)
					key = plain[rng.IntN(len(plain))]
				}
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			k := b8Key{key, lname}
			p := rng.IntN(6)
			if lname == "shared" {
				// A _shared item never outranks the project item that
				// overrides it (that case is TestBlackbox8WhyLayer).
				p = -1 - rng.IntN(3)
			}
			prio[k] = p
			it := map[string]any{"key": key, "kind": []string{"knowledge", "state", "skill", "decision"}[rng.IntN(4)],
				"content": text(3+rng.IntN(30)) + fmt.Sprintf(" marker%d", i), "priority": p, "source": "human",
				"authority":  []string{"policy", "instruction", "evidence", "hypothesis"}[rng.IntN(4)],
				"confidence": []string{"verified", "probable", "uncertain"}[rng.IntN(3)]}
			if lname == "shared" {
				it["authority"] = "hypothesis"
			}
			switch rng.IntN(8) {
			case 0:
				it["trigger"] = map[string]any{"keywords": []string{words[rng.IntN(len(words))]}}
			case 1:
				it["trigger"] = map[string]any{"tool": "lookup"}
			case 2:
				it["trigger"] = map[string]any{"relevance": true}
			}
			if rng.IntN(7) == 0 && lname == "project" {
				it["roles"] = map[string]any{"hidden_from": []string{"support"}}
				hid[k] = true
			}
			if rng.IntN(5) == 0 && lname == "project" {
				it["state_key"] = fmt.Sprintf("%s.s%d", proj, rng.IntN(4))
			}
			if rng.IntN(10) == 0 {
				it["template"] = true
				it["content"] = []string{"For {{customer}}: ", "Order {{order_id}}: "}[rng.IntN(2)] + text(3)
			}
			if rng.IntN(12) == 0 {
				it["valid_until"] = "2020-01-01T00:00:00Z"
			}
			_, hasTrigger := it["trigger"]
			_, hasRoles := it["roles"]
			_, hasWindow := it["valid_until"]
			_, isTemplate := it["template"]
			if lname == "project" && !hasTrigger && !hasRoles && !hasWindow && !isTemplate {
				plain = append(plain, key)
			}
			items = append(items, it)
			keys = append(keys, k)
			if lname == "shared" {
				*sharedSoFar = append(*sharedSoFar, k)
			}
		}
		e.batch(layer, items)
	}
	return keys, hid
}

func TestBlackbox8BudgetDoesNotChangeJudgement(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rng := rand.New(rand.NewPCG(88, 8))
	words := []string{"refund", "ledger", "deploy", "alpha", "beta", "gamma", "policy", "money", "invoice", "tariff"}
	text := func(k int) string {
		var out []string
		for range k {
			out = append(out, words[rng.IntN(len(words))])
		}
		return strings.Join(out, " ")
	}
	var sharedSoFar []b8Key // _shared is one layer for every project of the database
	for world := range 2 {
		proj := fmt.Sprintf("dw%d", world)
		e.project(proj)
		keys, hid := b8DiffWorld(t, e, rng, proj, words, text, &sharedSoFar)
		hidden := func(k b8Key) bool { return hid[k] }
		body := func(budget int) map[string]any {
			return map[string]any{"target_role": "support", "token_budget": budget, "query": "ledger invoice money",
				"history":      []map[string]any{{"role": "user", "author": "person", "content": "about the refund and the deploy"}},
				"tool_results": []map[string]any{{"tool": "lookup", "status": "ok", "content": "{}"}},
				"pins":         []string{fmt.Sprintf("%s.k%03d", proj, 7)},
				"variables":    map[string]any{"customer": "Ada"}}
		}
		roomy := b8Assemble(t, e, proj, e.admin, body(200000))
		require.Nil(t, roomy.cutoff)
		rrecs := b8Check(t, e, proj, e.admin, roomy, true)
		rres := b8WhyAll(t, e, proj, e.admin, roomy, rrecs, keys, hidden, true)

		for _, budget := range []int{[]int{150, 400}[world]} {
			small := b8Assemble(t, e, proj, e.admin, body(budget))
			require.NotNil(t, small.cutoff, "world %d budget %d", world, budget)
			srecs := b8Check(t, e, proj, e.admin, small, true)
			sres := b8WhyAll(t, e, proj, e.admin, small, srecs, keys, hidden, true)
			for _, k := range keys {
				rw, sw := rres.answers[k], sres.answers[k]
				rl, sl := b8WhyLabel(rw), b8WhyLabel(sw)
				if rl == "included" {
					require.Contains(t, []string{"included", "budget", "budget_cutoff"}, sl, "world %d budget %d %v: %s", world, budget, k, sw.text)
					if b8f(sw.json["rank"]) < small.cutRank() {
						require.Equal(t, rw.json["rank"], sw.json["rank"], "world %d budget %d %v: the rank does not depend on the budget", world, budget, k)
					} else {
						require.GreaterOrEqual(t, b8f(sw.json["rank"]), b8f(rw.json["rank"]), "world %d %v", world, k)
					}
					require.Equal(t, rw.json["rule"], sw.json["rule"], "world %d budget %d %v", world, budget, k)
				} else {
					require.Equal(t, rl, sl, "world %d budget %d %v: a stage's verdict does not depend on the budget: %s | %s", world, budget, k, rw.text, sw.text)
				}
			}
		}
	}
}

// TestBlackbox8TriesCountFromTheFirstExclusion: "after the first candidate
// that does not fit, 32 more are tried". For some budgets the window of 32
// opens one candidate early, at one that was finally included, so only 31
// are tried after the first budget exclusion and one more is cut.
func TestBlackbox8TriesCountFromTheFirstExclusion(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("window")
	kinds := []string{"knowledge", "state", "skill", "decision", "instruction", "episode", "evidence"}
	var items []map[string]any
	for i := range 60 {
		items = append(items, map[string]any{"key": fmt.Sprintf("f.%03d", i), "kind": kinds[i%len(kinds)],
			"content": fmt.Sprintf("Fact %d %s", i, strings.Repeat("mot ", i%11)), "priority": 500 - i})
	}
	e.batch("window", items)
	for _, tk := range []string{"o200k_base", "cl100k_base"} {
		for b := 120; b <= 200; b += 2 {
			p := b8Assemble(t, e, "window", e.admin, map[string]any{"target_role": "support", "token_budget": b, "tokenizer": tk})
			require.NotNil(t, p.cutoff)
			first := 0
			for _, r := range b8Records(t, e, "window", e.admin, p.id) {
				if r["subject"] == "item" && r["reason"] == "budget" && first == 0 {
					first = b8f(r["rank"])
				}
			}
			require.Equal(t, first+b8Tries+1, p.cutRank(), "%s budget %d: first budget exclusion at rank %d, cutoff %v", tk, b, first, p.cutoff)
			require.Equal(t, 60-(first+b8Tries), p.cutCount(), "%s budget %d", tk, b)
		}
	}
}
