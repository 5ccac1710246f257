package server_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
)

// TestSixteenWritersOfOneProject: packets, item writes and handoff
// transitions from 16 concurrent clients on one project — every one of
// them advancing the project's head row in its transaction, as the hash
// chain will — give no 5xx, retry at most 1% of their transactions, and
// every packet still replays byte-identical.
func TestSixteenWritersOfOneProject(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.project("acme")
	writer := e.agent("implementer", auth.Edit, "acme")
	critic := e.agent("critic", auth.Edit, "acme")
	for i := range 20 {
		r := e.do("PUT", fmt.Sprintf("/v1/projects/acme/items/k%d", i), e.admin, map[string]any{"content": fmt.Sprintf("fact %d about refunds", i)})
		require.Equal(t, 201, r.status, r.text)
	}
	const writers, rounds = 16, 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		packets []string
		bad     []string
	)
	note := func(kind string, status int, text string) {
		if status >= 500 {
			mu.Lock()
			bad = append(bad, fmt.Sprintf("%s: %d %s", kind, status, text))
			mu.Unlock()
		}
	}
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				switch w % 3 {
				case 0:
					r := e.do("POST", "/v1/projects/acme/packets", writer, map[string]any{
						"target_role": "implementer", "token_budget": 4000,
						"history": []map[string]any{{"role": "user", "author": "person", "content": "refunds please"}},
					}, "Idempotency-Key", fmt.Sprintf("p-%d-%d", w, i))
					note("packet", r.status, r.text)
					if r.status == 201 {
						mu.Lock()
						packets = append(packets, r.json["packet_id"].(string))
						mu.Unlock()
					}
				case 1:
					r := e.do("PUT", fmt.Sprintf("/v1/projects/acme/items/k%d", (w*rounds+i)%20), writer,
						map[string]any{"content": fmt.Sprintf("fact %d-%d about refunds", w, i)})
					note("item", r.status, r.text)
				case 2:
					r := e.do("POST", "/v1/projects/acme/handoffs", writer, map[string]any{
						"task_id": fmt.Sprintf("T-%d-%d", w, i), "intent": "request_review", "target": map[string]any{"role": "critic"}, "summary": "ready",
					})
					note("handoff", r.status, r.text)
					if r.status == 201 {
						a := e.do("POST", "/v1/projects/acme/handoffs/"+r.json["id"].(string)+"/accept", critic, map[string]any{})
						note("accept", a.status, a.text)
					}
				}
			}
		}()
	}
	wg.Wait()
	require.Empty(t, bad, "no 5xx under concurrent writers")
	var head int64
	require.NoError(t, e.pool.QueryRow(context.Background(), "SELECT seq FROM audit_heads WHERE chain = 'acme'").Scan(&head))
	retries := e.app.Store.Retries()
	t.Logf("%d writes advanced the head to %d; %d transactions retried", writers*rounds, head, retries)
	require.GreaterOrEqual(t, head, int64(writers*rounds), "every write advanced the project's head")
	require.LessOrEqual(t, float64(retries), 0.01*float64(head), "at most 1%% of the transactions retried")
	for _, id := range packets {
		rp := e.do("POST", "/v1/projects/acme/packets/"+id+"/replay", writer, nil)
		require.Equal(t, 200, rp.status, rp.text)
		require.Equal(t, true, rp.json["identical"], rp.text)
	}
}
