package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// client sends the bench's requests to one or more contextd processes,
// round-robin.
type client struct {
	urls []string
	next atomic.Uint64
	http *http.Client
}

func newClient(urls []string, conns int) *client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 4 * conns
	tr.MaxIdleConnsPerHost = 2 * conns
	trimmed := make([]string, len(urls))
	for i, u := range urls {
		trimmed[i] = strings.TrimRight(u, "/")
	}
	return &client{urls: trimmed, http: &http.Client{Transport: tr, Timeout: 5 * time.Minute}}
}

// httpError is an answer of status 300 or more.
type httpError struct {
	Method, Path string
	Status       int
	Body         string
}

func (e *httpError) Error() string {
	body := e.Body
	if len(body) > 300 {
		body = body[:300] + "..."
	}
	return fmt.Sprintf("%s %s: %d %s", e.Method, e.Path, e.Status, body)
}

// do sends body (nil, JSON already encoded as []byte, or anything JSON)
// with key and returns the answer's body; an answer of status 300 or more
// is an *httpError.
func (c *client) do(ctx context.Context, method, path, key string, body any) ([]byte, int, error) {
	var rd io.Reader
	if raw, ok := body.([]byte); ok {
		rd = bytes.NewReader(raw)
	} else if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, 0, err
		}
		rd = bytes.NewReader(b)
	}
	base := c.urls[(c.next.Add(1)-1)%uint64(len(c.urls))]
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.http.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, res.StatusCode, err
	}
	if res.StatusCode >= 300 {
		return raw, res.StatusCode, &httpError{Method: method, Path: path, Status: res.StatusCode, Body: string(raw)}
	}
	return raw, res.StatusCode, nil
}

// call is do, decoding a successful answer into out (unless out is nil).
func (c *client) call(ctx context.Context, method, path, key string, body, out any) error {
	raw, _, err := c.do(ctx, method, path, key, body)
	if err != nil || out == nil {
		return err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
	}
	return nil
}
