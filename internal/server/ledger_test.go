package server_test

// GET …/items/{key}/ledger and GET /v1/projects/{p}/ledger through the
// API: the figures equal what the records and outcomes say (a property
// test with concurrent writers and folds), the three orders page through
// every item the caller may see exactly once, a hidden item is neither
// listed nor readable for the role it is hidden from, and bad input.

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api"
	"github.com/contextd/contextd/internal/auth"
)

// ledgerFig is an item version's (or an item's) figures.
type ledgerFig struct {
	Offered, Included, Excluded, Tokens, Success, Failure, Partial, Answered, Used int64
	By                                                                             map[string]int64
}

func (f *ledgerFig) add(g ledgerFig) {
	f.Offered, f.Included, f.Excluded, f.Tokens = f.Offered+g.Offered, f.Included+g.Included, f.Excluded+g.Excluded, f.Tokens+g.Tokens
	f.Success, f.Failure, f.Partial = f.Success+g.Success, f.Failure+g.Failure, f.Partial+g.Partial
	f.Answered, f.Used = f.Answered+g.Answered, f.Used+g.Used
	for k, n := range g.By {
		f.By[k] += n
	}
}

// figOf reads figures from an answer's JSON object.
func figOf(m map[string]any) ledgerFig {
	n := func(k string) int64 { return int64(m[k].(float64)) }
	o := m["outcomes"].(map[string]any)
	f := ledgerFig{Offered: n("offered"), Included: n("included"), Excluded: n("excluded"), Tokens: n("tokens"),
		Success: int64(o["success"].(float64)), Failure: int64(o["failure"].(float64)), Partial: int64(o["partial"].(float64)),
		Answered: n("answered"), Used: n("used"), By: map[string]int64{}}
	for k, v := range m["excluded_by"].(map[string]any) {
		f.By[k] = int64(v.(float64))
	}
	return f
}

type versionKey struct {
	key     string
	version int
}

// expectedLedger recomputes every item version's figures of acme's
// packets from packet_records and packet_outcomes, in Go.
func expectedLedger(t *testing.T, e *env) map[versionKey]*ledgerFig {
	ctx := context.Background()
	type seen struct {
		included bool
		tokens   int64
		reason   string
	}
	perPacket := map[string]map[versionKey]*seen{}
	rows, err := e.pool.Query(ctx, `SELECT packet_id, subject_key, subject_version, decision, reason, tokens FROM packet_records
		WHERE project = 'acme' AND subject_kind = 'item' ORDER BY packet_id, ord`)
	require.NoError(t, err)
	for rows.Next() {
		var pid, key, decision, reason string
		var version, tokens int
		require.NoError(t, rows.Scan(&pid, &key, &version, &decision, &reason, &tokens))
		if perPacket[pid] == nil {
			perPacket[pid] = map[versionKey]*seen{}
		}
		vk := versionKey{key, version}
		s := perPacket[pid][vk]
		if s == nil {
			s = &seen{}
			perPacket[pid][vk] = s
		}
		if decision == "included" {
			s.included, s.tokens = true, s.tokens+int64(tokens)
		} else if s.reason == "" {
			s.reason = reason
		}
	}
	require.NoError(t, rows.Err())
	out := map[versionKey]*ledgerFig{}
	fig := func(vk versionKey) *ledgerFig {
		if out[vk] == nil {
			out[vk] = &ledgerFig{By: map[string]int64{}}
		}
		return out[vk]
	}
	for _, vs := range perPacket {
		for vk, s := range vs {
			f := fig(vk)
			f.Offered++
			if s.included {
				f.Included, f.Tokens = f.Included+1, f.Tokens+s.tokens
			} else {
				f.Excluded++
				f.By[s.reason]++
			}
		}
	}
	rows, err = e.pool.Query(ctx, `SELECT packet_id, status, answer IS NOT NULL, used FROM packet_outcomes WHERE project = 'acme'`)
	require.NoError(t, err)
	for rows.Next() {
		var pid, status string
		var answered bool
		var usedJSON []byte
		require.NoError(t, rows.Scan(&pid, &status, &answered, &usedJSON))
		var used []struct {
			Subject, Key string
			Version      int
		}
		require.NoError(t, json.Unmarshal(usedJSON, &used))
		for vk, s := range perPacket[pid] {
			if !s.included {
				continue
			}
			f := fig(vk)
			switch status {
			case "success":
				f.Success++
			case "failure":
				f.Failure++
			default:
				f.Partial++
			}
			if answered {
				f.Answered++
			}
			for _, u := range used {
				if u.Subject == "item" && u.Key == vk.key && u.Version == vk.version {
					f.Used++
				}
			}
		}
	}
	require.NoError(t, rows.Err())
	return out
}

// ledgerContent is the current text of the ledger world's items, for
// answers that quote them.
var ledgerContent = map[string]string{
	"always": "Always answer politely and briefly.",
	"k1":     "The rule called k1 says something specific about refunds.",
	"k2":     "The second rule called k2 says something else about refunds now.",
	"k3":     "The rule called k3 says something specific about refunds.",
	"k4":     "The rule called k4 says something specific about refunds.",
}

// ledgerWorld is acme with an always-on item, pinned-only items (k2 with
// a second version), a reviewer-only item, a read-only support agent and
// a reviewer.
type ledgerWorld struct {
	suspectWorld
	rev string
}

func newLedgerWorld(t *testing.T, keys []string) ledgerWorld {
	w := newSuspectWorld(t, keys...)
	w.batch("acme", []api.BatchItem{{Key: "secret", Content: "The reviewers' own rule says something specific about refunds.",
		Roles: &api.Roles{VisibleTo: &[]string{"reviewer"}}}})
	w.batch("acme", []api.BatchItem{{Key: "k2", Content: ledgerContent["k2"],
		Trigger: &api.Trigger{PinnedOnly: ptr(true)}}})
	return ledgerWorld{suspectWorld: w, rev: w.agent("reviewer", auth.ReadOnly, "acme")}
}

// randomTraffic assembles 16 packets of either role pinning random keys
// with random budgets, and writes 0 to 2 outcomes for each (some quoting
// an item), concurrently with ledger reads and background folds.
func randomTraffic(t *testing.T, w ledgerWorld, rng *rand.Rand, keys []string) {
	type job struct {
		key, role string
		pins      []string
		budget    int
		statuses  []string
		quotes    []string
	}
	var jobs []job
	for range 16 {
		j := job{key: w.sup, role: "support", budget: []int{60, 200, 4000}[rng.IntN(3)]}
		if rng.IntN(3) == 0 {
			j.key, j.role = w.rev, "reviewer"
		}
		for _, k := range keys {
			if rng.IntN(2) == 0 {
				j.pins = append(j.pins, k)
			}
		}
		for range rng.IntN(3) {
			j.statuses = append(j.statuses, []string{"success", "failure", "partial"}[rng.IntN(3)])
			quote := "always"
			if len(j.pins) > 0 {
				quote = j.pins[rng.IntN(len(j.pins))]
			}
			j.quotes = append(j.quotes, quote)
		}
		jobs = append(jobs, j)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			if _, err := w.app.Ledger.FoldAll(ctx); err != nil && ctx.Err() == nil {
				t.Errorf("fold: %v", err)
			}
		}
	})
	var writers sync.WaitGroup
	for i, j := range jobs {
		writers.Go(func() {
			r := w.do("POST", "/v1/projects/acme/packets", j.key, map[string]any{"target_role": j.role, "token_budget": j.budget, "pins": append([]string{}, j.pins...)})
			if r.status != 201 {
				t.Errorf("packet: %d %s", r.status, r.text)
				return
			}
			id := r.json["packet_id"].(string)
			for n, st := range j.statuses {
				body := map[string]any{"status": st}
				if n == 0 && i%3 != 2 {
					body["answer"] = "Well. " + ledgerContent[j.quotes[n]]
				}
				if r := w.do("POST", "/v1/projects/acme/packets/"+id+"/outcomes", j.key, body); r.status != 201 {
					t.Errorf("outcome %s: %d %s", id, r.status, r.text)
				}
			}
			if r := w.do("GET", "/v1/projects/acme/ledger", w.admin, nil); r.status != 200 {
				t.Errorf("ledger: %d %s", r.status, r.text)
			}
		})
	}
	writers.Wait()
	cancel()
	wg.Wait()
}

// TestLedgerCountsMatchRecordsAndOutcomes: after random packets and
// outcomes written concurrently with reads and folds, every item's ledger
// (per version and in total) is what the records and outcomes say, the
// project ledger's orders page through exactly the items the caller may
// see, in their order, and the migration's backfill counts the same.
func TestLedgerCountsMatchRecordsAndOutcomes(t *testing.T) {
	t.Parallel()
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 34))
	keys := []string{"k1", "k2", "k3", "k4"}
	w := newLedgerWorld(t, keys)
	randomTraffic(t, w, rng, keys)

	want := expectedLedger(t, w.env)
	wantKeys := map[string]*ledgerFig{}
	for vk, f := range want {
		if wantKeys[vk.key] == nil {
			wantKeys[vk.key] = &ledgerFig{By: map[string]int64{}}
		}
		wantKeys[vk.key].add(*f)
	}
	require.Contains(t, wantKeys, "always")
	for key, total := range wantKeys {
		r := w.do("GET", "/v1/projects/acme/items/"+key+"/ledger?limit=1", w.admin, nil)
		require.Equal(t, 200, r.status, r.text)
		require.Equal(t, "acme", r.json["project"])
		require.Equal(t, "acme", r.json["item_project"])
		require.Zero(t, r.num("pending"))
		require.Equal(t, *total, figOf(r.json["totals"].(map[string]any)), key)
		var versions []map[string]any
		for {
			for _, v := range r.json["versions"].([]any) {
				versions = append(versions, v.(map[string]any))
			}
			next, _ := r.json["next_cursor"].(string)
			if next == "" {
				break
			}
			r = w.do("GET", "/v1/projects/acme/items/"+key+"/ledger?limit=1&cursor="+next, w.admin, nil)
			require.Equal(t, 200, r.status, r.text)
		}
		n := 0
		for vk, f := range want {
			if vk.key == key {
				n++
				i := slices.IndexFunc(versions, func(v map[string]any) bool { return int(v["version"].(float64)) == vk.version })
				require.GreaterOrEqual(t, i, 0, "%v", vk)
				require.Equal(t, *f, figOf(versions[i]), "%v", vk)
			}
		}
		require.Len(t, versions, n, key)
	}
	for k, f := range wantKeys {
		t.Logf("%s %+v", k, *f)
	}
	require.Positive(t, wantKeys["secret"].Excluded, "support's packets exclude the reviewers' item")
	checkLedgerOrders(t, w, wantKeys)

	// The migration's backfill queues every packet and outcome again into
	// an empty ledger; the folds count the same.
	before := w.do("GET", "/v1/projects/acme/ledger?sort=tokens", w.admin, nil).text
	src, err := os.ReadFile("../../migrations/00034_item_ledger.sql")
	require.NoError(t, err)
	up, _, _ := strings.Cut(string(src), "-- +goose Down")
	_, err = w.pool.Exec(context.Background(), "DELETE FROM item_ledger; DELETE FROM item_ledger_keys; DELETE FROM ledger_queue")
	require.NoError(t, err)
	_, err = w.pool.Exec(context.Background(), up)
	require.NoError(t, err)
	require.Equal(t, before, w.do("GET", "/v1/projects/acme/ledger?sort=tokens", w.admin, nil).text)
}

// checkLedgerOrders pages each order of the project ledger, two at a time,
// as the admin and as support (from whom "secret" is hidden), and checks
// it against the figures wanted.
func checkLedgerOrders(t *testing.T, w ledgerWorld, want map[string]*ledgerFig) {
	for _, who := range []struct{ name, key string }{{"admin", w.admin}, {"support", w.sup}} {
		for _, sort := range []string{"failure_rate", "tokens", "unused"} {
			var got []map[string]any
			path := "/v1/projects/acme/ledger?limit=2&sort=" + sort
			for r := w.do("GET", path, who.key, nil); ; {
				require.Equal(t, 200, r.status, r.text)
				require.Equal(t, sort, r.json["sort"])
				for _, e := range r.json["data"].([]any) {
					got = append(got, e.(map[string]any))
				}
				next, _ := r.json["next_cursor"].(string)
				if next == "" {
					break
				}
				r = w.do("GET", path+"&cursor="+next, who.key, nil)
			}
			var keys []string
			for _, e := range got {
				keys = append(keys, e["key"].(string))
				require.Equal(t, *want[e["key"].(string)], figOf(e), "%s %s", sort, e["key"])
			}
			var wantKeys []string
			for k := range want {
				if k != "secret" || who.name == "admin" {
					wantKeys = append(wantKeys, k)
				}
			}
			require.ElementsMatch(t, wantKeys, keys, "%s sees every item it may, once (%s)", who.name, sort)
			require.True(t, slices.IsSortedFunc(got, ledgerOrder(sort)), "%s: %v", sort, keys)
		}
	}
}

// ledgerOrder compares two entries in an order of the project ledger.
func ledgerOrder(sort string) func(a, b map[string]any) int {
	num := func(m map[string]any, k string) float64 { return m[k].(float64) }
	outcomes := func(m map[string]any) (n, f float64) {
		o := m["outcomes"].(map[string]any)
		f = o["failure"].(float64)
		return o["success"].(float64) + f + o["partial"].(float64), f
	}
	rate := func(m map[string]any) float64 {
		n, f := outcomes(m)
		if n == 0 {
			return -1
		}
		return f / n
	}
	return func(a, b map[string]any) int {
		var c int
		switch sort {
		case "failure_rate":
			_, fa := outcomes(a)
			_, fb := outcomes(b)
			c = cmpDesc(rate(a), rate(b))
			if c == 0 {
				c = cmpDesc(fa, fb)
			}
		case "tokens":
			c = cmpDesc(num(a, "tokens"), num(b, "tokens"))
		case "unused":
			c = cmpDesc(num(b, "used"), num(a, "used"))
			if c == 0 {
				c = cmpDesc(num(a, "tokens"), num(b, "tokens"))
			}
		}
		if c == 0 {
			c = strings.Compare(a["project"].(string)+"/"+a["key"].(string), b["project"].(string)+"/"+b["key"].(string))
		}
		return c
	}
}

func cmpDesc(a, b float64) int {
	switch {
	case a > b:
		return -1
	case a < b:
		return 1
	}
	return 0
}

// TestLedgerHiddenAndBadInput: an item hidden from a role is 404 to it;
// the reviewer it is visible to reads it; an unknown sort, a limit out of
// range, a forged cursor and the ledger of _shared are 422; a project the
// caller may not see is 404 or 403 as everywhere.
func TestLedgerHiddenAndBadInput(t *testing.T) {
	t.Parallel()
	w := newLedgerWorld(t, []string{"k1", "k2"})
	w.packet("", "", "k1")
	r := w.do("POST", "/v1/projects/acme/packets", w.rev, map[string]any{"target_role": "reviewer"})
	require.Equal(t, 201, r.status, r.text)

	require.Equal(t, 404, w.do("GET", "/v1/projects/acme/items/secret/ledger", w.sup, nil).status)
	r = w.do("GET", "/v1/projects/acme/items/secret/ledger", w.rev, nil)
	require.Equal(t, 200, r.status, r.text)
	require.Equal(t, int64(1), figOf(r.json["totals"].(map[string]any)).Included)
	r = w.do("GET", "/v1/projects/acme/items/k3/ledger", w.sup, nil)
	require.Equal(t, 404, r.status, "an item that does not exist: %s", r.text)
	r = w.do("GET", "/v1/projects/acme/items/k2/ledger", w.sup, nil)
	require.Equal(t, 200, r.status, r.text)
	require.Empty(t, r.json["versions"], "never a candidate: no figures")
	require.Equal(t, ledgerFig{By: map[string]int64{}}, figOf(r.json["totals"].(map[string]any)))

	for _, c := range []struct{ path, param string }{
		{"/v1/projects/acme/ledger?sort=newest", "sort"},
		{"/v1/projects/acme/ledger?limit=0", "limit"},
		{"/v1/projects/acme/ledger?cursor=bm90LWEtY3Vyc29y", "cursor"},
		{"/v1/projects/_shared/ledger", "project"},
		{"/v1/projects/acme/items/k1/ledger?project=other", "project"},
	} {
		r := w.do("GET", c.path, w.admin, nil)
		require.Equal(t, 422, r.status, "%s: %s", c.path, r.text)
		require.Contains(t, r.text, c.param, c.path)
	}
	other := w.agent("support", auth.ReadOnly, "_shared")
	w.project("beta")
	r = w.do("GET", "/v1/projects/acme/ledger", other, nil)
	require.Contains(t, []int{403, 404}, r.status, r.text)
	r = w.do("GET", fmt.Sprintf("/v1/projects/%s/ledger", "beta"), w.sup, nil)
	require.Contains(t, []int{403, 404}, r.status, r.text)
}
