// Package client is the Go client of contextd's HTTP API.
//
// Its two halves are generated from and written over the contract beside
// it (../openapi.yaml): client.gen.go holds the models (Packet, Item,
// Handoff, ...) and Raw, a client of every operation that answers the
// *http.Response (make generate writes it); Client is the small layer for
// the common calls, each decoding its answer into the model, and every
// answer that is not 2xx comes back as a *Problem.
//
//	c, err := client.New("http://127.0.0.1:8080", os.Getenv("CONTEXTD_KEY"))
//	p, err := c.Assemble(ctx, "acme", client.PacketRequest{TargetRole: "coder"})
//	var pr *client.Problem
//	if errors.As(err, &pr) && pr.Code == "not_found" { ... }
//
// For an operation the layer does not cover, call it on Raw and read the
// answer with ReadAnswer:
//
//	res, err := c.Raw().ListPackets(ctx, "acme", &client.ListPacketsParams{})
//	var page client.PacketList
//	err = c.ReadAnswer(res, err, &page)
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Client calls a contextd server with one agent's key. It is safe for
// concurrent use.
type Client struct {
	base   string // as given, without a trailing slash
	raw    *Raw
	stream *Raw // raw with a Doer without a whole-request timeout, for the event stream
}

// New returns a client of the server at baseURL (scheme, host and any path
// prefix, e.g. http://127.0.0.1:8080) that sends key as its bearer token.
// The options are Raw's: WithHTTPClient (the default is an http.Client
// without a timeout, so bound calls with their context), WithRequestEditorFn
// (e.g. to add headers), or WithBaseURL.
func New(baseURL, key string, opts ...ClientOption) (*Client, error) {
	base := strings.TrimRight(baseURL, "/")
	auth := func(_ context.Context, req *http.Request) error {
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		return nil
	}
	raw, err := NewClient(base, append([]ClientOption{WithRequestEditorFn(auth)}, opts...)...)
	if err != nil {
		return nil, err
	}
	stream := *raw
	if hc, ok := raw.Client.(*http.Client); ok && hc.Timeout > 0 {
		// A stream lasts: the timeout of a whole request would end it.
		untimed := *hc
		untimed.Timeout = 0
		stream.Client = &untimed
	}
	return &Client{base: base, raw: raw, stream: &stream}, nil
}

// Raw is the generated client under c, with c's key and options, for the
// operations the layer does not cover; read its answers with ReadAnswer.
func (c *Client) Raw() *Raw { return c.raw }

// BaseURL is the server's URL as New was given it, without a trailing slash.
func (c *Client) BaseURL() string { return c.base }

// ReadAnswer reads and closes the answer of a Raw call: err (the call's
// error) comes back wrapped with the server's address; an answer that is
// not 2xx is a *Problem; a 2xx answer is decoded as JSON into out, unless
// out is nil.
func (c *Client) ReadAnswer(res *http.Response, err error, out any) error {
	if err != nil {
		return fmt.Errorf("contextd at %s: %w", c.base, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return fmt.Errorf("contextd at %s: reading the answer: %w", c.base, err)
	}
	if res.StatusCode < 200 || res.StatusCode >= 300 {
		return problemOf(res, body)
	}
	if out == nil || len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("contextd at %s: the answer to %s %s is not the JSON expected: %w", c.base, res.Request.Method, res.Request.URL.Path, err)
	}
	return nil
}

// jsonBody is v as a request body.
func jsonBody(v any) (io.Reader, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(b), nil
}

const contentJSON = "application/json"
