package faulttest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// client talks to one server process with one key. Each server process
// gets a client of its own, so no connection of a killed process is reused.
type client struct {
	base string
	key  string
	hc   *http.Client
	obs  *observer // nil: answers are not recorded
}

func newClient(base, key string, timeout time.Duration, obs *observer) *client {
	tr := &http.Transport{MaxIdleConnsPerHost: 32, IdleConnTimeout: 30 * time.Second}
	return &client{base: base, key: key, hc: &http.Client{Timeout: timeout, Transport: tr}, obs: obs}
}

func (c *client) close() { c.hc.CloseIdleConnections() }

// answer is one HTTP answer, read whole.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// ok reports a 2xx answer: an acknowledged request.
func (a answer) ok() bool { return a.status >= 200 && a.status < 300 }

// code is the problem document's code, "" for anything else.
func (a answer) code() string {
	var p struct {
		Code string `json:"code"`
	}
	if a.header.Get("Content-Type") == "application/problem+json" {
		_ = json.Unmarshal(a.body, &p)
	}
	return p.Code
}

func (a answer) String() string { return fmt.Sprintf("%d %s", a.status, bytes.TrimSpace(a.body)) }

// do sends one request. body is nil, []byte (sent as is) or a value sent as
// JSON; hdr holds header name/value pairs.
func (c *client) do(ctx context.Context, method, path string, body any, hdr ...string) (answer, error) {
	var raw []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		raw = b
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			return answer{}, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(raw))
	if err != nil {
		return answer{}, err
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	start := time.Now()
	a, err := c.roundTrip(req)
	if c.obs != nil {
		c.obs.add(outcome{method: method, path: path, start: start, took: time.Since(start), a: a, err: err})
	}
	return a, err
}

func (c *client) roundTrip(req *http.Request) (answer, error) {
	res, err := c.hc.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return answer{}, fmt.Errorf("read answer: %w", err)
	}
	return answer{status: res.StatusCode, header: res.Header, body: b}, nil
}

// get is do for a read that must succeed: it decodes a 2xx answer into out.
func (c *client) get(ctx context.Context, path string, out any) (answer, error) {
	a, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return a, err
	}
	if !a.ok() {
		return a, fmt.Errorf("GET %s: %s", path, a)
	}
	return a, json.Unmarshal(a.body, out)
}

// outcome is one request as the client saw it.
type outcome struct {
	method, path string
	start        time.Time
	took         time.Duration
	a            answer
	err          error
}

// observer records every outcome, for the timing assertions of the
// outage test.
type observer struct {
	mu  sync.Mutex
	all []outcome
}

func (o *observer) add(x outcome) {
	o.mu.Lock()
	o.all = append(o.all, x)
	o.mu.Unlock()
}

func (o *observer) outcomes() []outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]outcome(nil), o.all...)
}
