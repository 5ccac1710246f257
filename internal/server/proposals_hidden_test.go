package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/auth"
)

// eventsUntil collects a stream's events until one whose data contains
// marker arrives (included), or fails after 10 s.
func eventsUntil(t *testing.T, ch <-chan sseEvent, marker string) []sseEvent {
	t.Helper()
	var out []sseEvent
	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			require.True(t, ok, "the stream ended before %s", marker)
			out = append(out, ev)
			if strings.Contains(ev.data, marker) {
				return out
			}
		case <-deadline:
			t.Fatalf("no event with %s in 10 s; had %v", marker, out)
		}
	}
}

// TestProposalEventsKeepToWhatTheRoleMaySee: an inbox is no way round an
// item's roles. An admin of role writer proposes on an item hidden from
// writers: the writers' author stream (source_role) does not carry it. A
// proposal made while its item was visible to reviewers, rejected after
// the item was hidden from them, does not reach the reviewers' inbox with
// its reason. And an item's GET counts only the pending proposals whose
// own roles let the caller see them.
func TestProposalEventsKeepToWhatTheRoleMaySee(t *testing.T) {
	t.Parallel()
	w := newProposalWorld(t)
	boss, _ := w.named("boss", "writer", auth.Admin, "*")
	require.Equal(t, 201, w.do("PUT", acmeItems+"secret", boss, map[string]any{"content": "the secret",
		"roles": map[string]any{"visible_to": []string{"reviewer"}}}).status)
	require.Equal(t, 404, w.do("GET", acmeItems+"secret", w.writer, nil).status)
	require.Equal(t, 202, w.propose(boss, "secret", "the new secret").status)
	require.Equal(t, 202, w.propose(boss, "public-marker", "anyone may see this").status)
	author, stop := openStream(t, w.url, w.writer, "?source_role=writer", "0")
	t.Cleanup(stop) // a failed check must not leave the stream holding the server open
	for _, ev := range eventsUntil(t, author, `"key":"public-marker"`) {
		require.NotContains(t, ev.data, `"key":"secret"`, "the writers' stream names an item hidden from writers")
	}
	stop()

	require.Equal(t, 202, w.propose(w.writer, "pub2", "was public").status)
	require.Equal(t, 201, w.do("PUT", acmeItems+"pub2", w.admin, map[string]any{"content": "now hidden",
		"roles": map[string]any{"hidden_from": []string{"reviewer"}}}).status)
	require.Equal(t, 404, w.do("GET", acmeItems+"pub2", w.reviewer, nil).status)
	require.Equal(t, 200, w.reject(w.writer, "pub2", 1, map[string]any{"reason": "confidential: merger with X"}).status)
	require.Equal(t, 202, w.propose(w.writer, "marker2", "anyone may see this too").status)
	inbox, stop2 := openStream(t, w.url, w.reviewer, "?target_role=reviewer", "0")
	t.Cleanup(stop2)
	for _, ev := range eventsUntil(t, inbox, `"key":"marker2"`) {
		require.NotContains(t, ev.data, "pub2", "the reviewers' inbox names an item hidden from reviewers")
		require.NotContains(t, ev.data, "merger")
	}
	stop2()
	admin, stop3 := openStream(t, w.url, w.admin, "", "0")
	t.Cleanup(stop3)
	var sawSecret bool
	for _, ev := range eventsUntil(t, admin, `"key":"marker2"`) {
		sawSecret = sawSecret || strings.Contains(ev.data, `"key":"secret"`)
	}
	require.True(t, sawSecret, "an admin's stream carries every event")
	stop3()

	require.Equal(t, 201, w.do("PUT", acmeItems+"pub", w.admin, map[string]any{"content": "public"}).status)
	require.Equal(t, 202, w.propose(w.writer, "pub", "a change for writers only",
		"roles", map[string]any{"visible_to": []string{"writer"}}).status)
	require.EqualValues(t, 0, w.do("GET", acmeItems+"pub", w.reader, nil).json["pending_proposals"], "the reader may not see it")
	require.EqualValues(t, 1, w.do("GET", acmeItems+"pub", w.writer, nil).json["pending_proposals"])
	require.EqualValues(t, 1, w.do("GET", acmeItems+"pub", w.admin, nil).json["pending_proposals"])
}
