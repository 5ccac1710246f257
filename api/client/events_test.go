package client_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/api/client"
)

// TestEventsReconnectAndResume: a dropped stream is opened again with
// Last-Event-ID set to the last event yielded; a busy server (503) is
// tried again after its Retry-After; the key is sent on each.
func TestEventsReconnectAndResume(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string // each request's Last-Event-ID
	n := 0
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		call := n
		seen = append(seen, r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		require.Equal(t, "Bearer k", r.Header.Get("Authorization"))
		require.Equal(t, "/v1/projects/p/handoffs/events", r.URL.Path)
		require.Equal(t, "reviewer", r.URL.Query().Get("target_role"))
		if call == 2 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"type":"t","title":"Service Unavailable","status":503,"code":"unavailable","detail":"pool exhausted"}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, ": hello\n\n")
		fmt.Fprintf(w, "id: %d\nevent: created\ndata: {\"seq\":%d,\n", call, call)
		fmt.Fprintf(w, "data: \"handoff_id\":\"h%d\"}\n\n", call)
		w.(http.Flusher).Flush()
		if call == 3 {
			<-r.Context().Done() // the client breaks
		}
	}))
	defer ts.Close()
	c, err := client.New(ts.URL+"/", "k")
	require.NoError(t, err)
	var ids []string
	for ev, err := range c.Events(t.Context(), "p", client.EventsOptions{TargetRole: "reviewer", LastEventID: "0", RetryWait: 10 * time.Millisecond}) {
		require.NoError(t, err)
		require.Equal(t, "created", ev.Type)
		d, err := ev.Decode()
		require.NoError(t, err)
		require.Equal(t, "h"+ev.ID, d.HandoffID, "data lines are joined")
		ids = append(ids, ev.ID)
		if len(ids) == 2 {
			break
		}
	}
	require.Equal(t, []string{"1", "3"}, ids)
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, []string{"0", "1", "1"}, seen)
}

// TestEventsRefused: a refusal that is not temporary ends the stream with
// the *Problem; Once ends it with the connection.
func TestEventsRefused(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer good" {
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("X-Request-Id", "req-1")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"type":"t","title":"Unauthorized","status":401,"code":"unauthenticated","detail":"bad key"}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "id: 7\nevent: accepted\ndata: {}\n\n")
	}))
	defer ts.Close()
	bad, err := client.New(ts.URL, "bad")
	require.NoError(t, err)
	err = bad.Watch(t.Context(), "p", client.EventsOptions{}, func(client.Event) error { return nil })
	var p *client.Problem
	require.ErrorAs(t, err, &p)
	require.Equal(t, 401, p.Status)
	require.Equal(t, "unauthenticated", p.Code)
	require.Equal(t, "req-1", p.RequestID)
	require.Equal(t, "401 unauthenticated: bad key", p.Error())

	good, err := client.New(ts.URL, "good")
	require.NoError(t, err)
	var got []client.Event
	require.NoError(t, good.Watch(t.Context(), "p", client.EventsOptions{Once: true}, func(ev client.Event) error {
		got = append(got, ev)
		return nil
	}))
	require.Equal(t, []client.Event{{ID: "7", Type: "accepted", Data: []byte("{}")}}, got)

	stop := errors.New("stop")
	require.ErrorIs(t, good.Watch(t.Context(), "p", client.EventsOptions{}, func(client.Event) error { return stop }), stop)

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	n := 0
	require.NoError(t, good.Watch(ctx, "p", client.EventsOptions{RetryWait: time.Millisecond}, func(client.Event) error { n++; return nil }),
		"the end of ctx ends the stream without an error")
	require.Greater(t, n, 1, "an ended stream is opened again")
}

// TestProblemMembers: a problem about a parameter names it; the request id
// comes along; Raw calls read through ReadAnswer answer the same.
func TestProblemMembers(t *testing.T) {
	c := newProject("problem-test")
	err := c.Watch(t.Context(), "problem-test", client.EventsOptions{LastEventID: "x"}, func(client.Event) error { return nil })
	var p *client.Problem
	require.ErrorAs(t, err, &p)
	require.Equal(t, 422, p.Status)
	require.Equal(t, "validation_failed", p.Code)
	require.Equal(t, []client.ProblemField{{Parameter: "Last-Event-ID", Code: "format", Detail: "Last-Event-ID must be an event id this stream sent"}}, p.Errors)
	require.NotEmpty(t, p.RequestID)
	require.NotEmpty(t, p.Title)

	res, err := c.Raw().GetPacket(t.Context(), "problem-test", "ctxpkt_missing")
	err = c.ReadAnswer(res, err, &client.Packet{})
	require.ErrorAs(t, err, &p)
	require.Equal(t, 404, p.Status)

	var page client.PacketList
	res, err = c.Raw().ListPackets(t.Context(), "problem-test", &client.ListPacketsParams{})
	require.NoError(t, c.ReadAnswer(res, err, &page))
	require.Empty(t, page.Data)

	down, err := client.New("http://127.0.0.1:1", adminKey)
	require.NoError(t, err)
	_, err = down.Item(t.Context(), "p", "k")
	require.ErrorContains(t, err, "contextd at http://127.0.0.1:1: ")
}
