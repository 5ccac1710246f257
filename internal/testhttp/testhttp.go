// Package testhttp is the HTTP side of the tests of internal/server and
// internal/ui: a whole contextd server (API and explorer) on a test
// store, with the audit key the tests sign with and an admin's key, and
// requests to it with a typed body and their answer read back, problems
// included.
//
// It starts the server the way serve does (app.New with the keys, the
// migrations' chains adopted, server.New), so a test over HTTP runs
// against the same wiring as production. The store comes from the caller
// (pgtest.New and store.New), so a test can keep its pool for read-only
// SQL, or start two servers on one database.
package testhttp

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/contextd/contextd/internal/app"
	"github.com/contextd/contextd/internal/auth"
	"github.com/contextd/contextd/internal/evidence"
	"github.com/contextd/contextd/internal/server"
	"github.com/contextd/contextd/internal/store"
)

// Keys is the servers' audit key in tests: a fixed key, so that a test can
// verify what the server sealed and signed.
var Keys = mustKey("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")

func mustKey(s string) *evidence.Keys {
	k, err := evidence.ParseKey(s)
	if err != nil {
		panic(err)
	}
	return k
}

// Options says how to start a server. The zero value is a plain HTTP
// server with the default configuration.
type Options struct {
	// Config is the server's configuration; App is filled by Start.
	Config server.Config
	// TLS serves over HTTPS (the explorer's secure cookies).
	TLS bool
}

// Client sends requests to a server at URL.
type Client struct {
	t    testing.TB
	URL  string
	HTTP *http.Client
}

// NewClient is a client of the server at url (http.DefaultClient's
// transport): for a server a test started itself.
func NewClient(t testing.TB, url string) *Client {
	return &Client{t: t, URL: url, HTTP: http.DefaultClient}
}

// Server is a started server with an admin's key; its Client trusts the
// server's certificate when it serves TLS.
type Server struct {
	*Client
	TS    *httptest.Server
	App   *app.App
	Store *store.Store
	Admin string // an admin's API key
}

// Start starts a server on st and returns it with an admin's key: the
// bootstrap admin's on a fresh database, a new admin's when another
// server on the database already bootstrapped. The server closes when the
// test ends.
func Start(t testing.TB, st *store.Store, o Options) *Server {
	t.Helper()
	a := app.New(st, app.WithKeys(Keys))
	// As serve does when it migrates: the harness migrates without the key.
	_, err := st.AdoptChains(t.Context(), Keys.Seal)
	require.NoError(t, err)
	cfg := o.Config
	cfg.App = a
	srv := httptest.NewUnstartedServer(server.New(cfg))
	if o.TLS {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	_, key, err := a.Agents.Bootstrap(t.Context())
	require.NoError(t, err)
	if key == "" { // a second server over the same database
		_, key, err = a.Agents.CreateLocal(t.Context(), auth.CreateParams{Name: "admin2", Role: "admin", Permission: auth.Admin, Projects: []string{auth.AllProjects}})
		require.NoError(t, err)
	}
	return &Server{Client: &Client{t: t, URL: srv.URL, HTTP: srv.Client()}, TS: srv, App: a, Store: st, Admin: key}
}

// Agent creates an agent named name with the operator's rights (as
// `contextd agent create` does) and returns it with its key.
func (s *Server) Agent(name, role string, perm auth.Permission, projects ...string) (*auth.Agent, string) {
	s.Client.t.Helper()
	a, key, err := s.App.Agents.CreateLocal(s.Client.t.Context(), auth.CreateParams{Name: name, Role: role, Permission: perm, Projects: projects})
	require.NoError(s.Client.t, err)
	return a, key
}

// Response is an answer: its status, headers, body and, when the body is
// a JSON object, that object.
type Response struct {
	Status int
	Header http.Header
	Text   string
	JSON   map[string]any
}

// Do sends a request with key as its bearer (none when empty). body is
// nil, a string or []byte (sent as is: a malformed body), or anything
// else, sent as JSON: a typed api request body. headers are name, value
// pairs. An answer of 400 or more must be a problem (problem+json with a
// code).
func (s *Client) Do(method, path, key string, body any, headers ...string) Response {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		buf, err := json.Marshal(b)
		require.NoError(s.t, err)
		rd = bytes.NewReader(buf)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	require.NoError(s.t, err)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := s.HTTP.Do(req)
	require.NoError(s.t, err)
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	require.NoError(s.t, err)
	out := Response{Status: res.StatusCode, Header: res.Header, Text: string(raw)}
	if len(raw) > 0 && raw[0] == '{' {
		require.NoError(s.t, json.Unmarshal(raw, &out.JSON), string(raw))
	}
	if res.StatusCode >= 400 {
		require.Equal(s.t, "application/problem+json", res.Header.Get("Content-Type"), string(raw))
		require.NotEmpty(s.t, out.JSON["code"], string(raw))
	}
	return out
}

// Must is Do that requires the status, and returns the answer's object.
func (s *Client) Must(status int, method, path, key string, body any) map[string]any {
	s.t.Helper()
	r := s.Do(method, path, key, body)
	require.Equal(s.t, status, r.Status, "%s %s: %s", method, path, r.Text)
	return r.JSON
}

// Decode is the answer's body as a T (an api type).
func Decode[T any](t testing.TB, r Response) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal([]byte(r.Text), &v), r.Text)
	return v
}

// FieldError is one field error of a problem.
type FieldError struct {
	Pointer   string `json:"pointer"`
	Parameter string `json:"parameter"`
	Code      string `json:"code"`
	Detail    string `json:"detail"`
}

// Problem is a problem+json answer.
type Problem struct {
	Status int          `json:"status"`
	Code   string       `json:"code"`
	Title  string       `json:"title"`
	Detail string       `json:"detail"`
	Errors []FieldError `json:"errors"`
}

// Problem decodes the answer as a problem; it must be one.
func (r Response) Problem(t testing.TB) Problem {
	t.Helper()
	require.GreaterOrEqual(t, r.Status, 400, r.Text)
	return Decode[Problem](t, r)
}

// Pointers are the JSON Pointers (or parameter names) of a problem's
// field errors, in order.
func (r Response) Pointers() []string {
	errs, _ := r.JSON["errors"].([]any)
	var out []string
	for _, e := range errs {
		m, _ := e.(map[string]any)
		p, _ := m["pointer"].(string)
		if p == "" {
			p, _ = m["parameter"].(string)
		}
		out = append(out, p)
	}
	return out
}

// List is the "data" array of a list answer.
func (r Response) List() []map[string]any {
	data, _ := r.JSON["data"].([]any)
	out := make([]map[string]any, len(data))
	for i, d := range data {
		out[i], _ = d.(map[string]any)
	}
	return out
}

// Num is a numeric member of the answer's object, as an int.
func (r Response) Num(field string) int {
	f, _ := r.JSON[field].(float64)
	return int(f)
}
