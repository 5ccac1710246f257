package app

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// Defaults of the minimum body rate. A 32 MiB batch at 1 KiB/s would take
// nine hours, so no client on a working link comes near the rule, while a
// body trickled in a byte a second holds its connection for the 10 s grace
// period instead of the whole --read-timeout.
const (
	DefaultMinBodyRate      = 1 << 10 // bytes per second
	DefaultMinBodyRateGrace = 10 * time.Second
)

// SlowBodyError is the read error of a request body that arrived slower
// than --min-body-rate. It wraps the connection's deadline error
// (os.ErrDeadlineExceeded), which a body cut off by --read-timeout returns
// bare: the server answers both 408.
type SlowBodyError struct {
	Rate int64 // the minimum, bytes per second
	Read int64 // bytes that had arrived
	Took time.Duration
	err  error
}

func (e *SlowBodyError) Error() string {
	return fmt.Sprintf("the request body arrived slower than the minimum of %d bytes/s (%d bytes in %s)", e.Rate, e.Read, e.Took.Round(time.Millisecond))
}

func (e *SlowBodyError) Unwrap() error { return e.err }

// validateBodyRate checks --min-body-rate and its grace period: with no
// grace the rule would cut every body before its first byte.
func (c *Config) validateBodyRate() []error {
	var errs []error
	if c.MinBodyRate < 0 {
		errs = append(errs, errors.New("--min-body-rate: must not be negative (0: no minimum)"))
	}
	if c.MinBodyRate > 0 && c.MinBodyRateGrace <= 0 {
		errs = append(errs, errors.New("--min-body-rate-grace: must be positive while --min-body-rate is set"))
	}
	return errs
}

// withBodyRate wraps h so that request bodies keep to MinBodyRate. The
// server's ReadTimeout is one deadline for a whole request, so a body
// trickled in a byte a second held its connection (and goroutine) that
// long, with or without a valid key. Here the connection's read deadline
// follows the body instead (rateBody), and stays no later than ReadTimeout
// allows.
func (c *Config) withBodyRate(h http.Handler) http.Handler {
	if c.MinBodyRate <= 0 || h == nil {
		return h
	}
	rule := rateRule{rate: c.MinBodyRate, grace: c.MinBodyRateGrace, readTimeout: c.ReadTimeout}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body != nil && r.Body != http.NoBody {
			if b := rule.track(w, r.Body); b != nil {
				// A copy: the server's own request keeps its body, by which
				// it decides what to do with what the handler left unread.
				r2 := *r
				r2.Body = b
				r = &r2
			}
		}
		h.ServeHTTP(w, r)
	})
}

// rateRule is the minimum rate of a body after its grace period, and the
// read timeout it may not outlast.
type rateRule struct {
	rate        int64
	grace       time.Duration
	readTimeout time.Duration
}

// track starts the rule on a body: nil when the connection's read deadline
// cannot be set. The first deadline, grace from now, is set at once: a
// handler that answers without reading the body (a 401) leaves the server
// to drain it, which must not wait on a trickle either.
func (rr rateRule) track(w http.ResponseWriter, body io.ReadCloser) *rateBody {
	now := time.Now()
	b := &rateBody{ReadCloser: body, rule: rr, rc: http.NewResponseController(w)}
	if rr.readTimeout > 0 {
		// The server counts its read timeout from before the headers; from
		// here it ends at most the headers' read time later.
		b.limit = now.Add(rr.readTimeout)
	}
	if dl, _ := b.deadline(now); b.rc.SetReadDeadline(dl) != nil {
		return nil
	}
	return b
}

// rateBody is a request body whose every read must come before the moment
// its average rate since its first read would fall under the minimum. The
// clock starts at the first read, not at the headers: a client that sent
// Expect: 100-continue waits for it, and so may a handler.
type rateBody struct {
	io.ReadCloser
	rule  rateRule
	rc    *http.ResponseController
	limit time.Time // the read timeout's end; zero: none
	start time.Time // the first read; zero before
	read  int64
}

func (b *rateBody) Read(p []byte) (int, error) {
	if b.start.IsZero() {
		b.start = time.Now()
	}
	dl, ours := b.deadline(b.start)
	_ = b.rc.SetReadDeadline(dl) // track has seen that it can be set
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	if err != nil && ours && errors.Is(err, os.ErrDeadlineExceeded) {
		err = &SlowBodyError{Rate: b.rule.rate, Read: b.read, Took: time.Since(b.start), err: err}
	}
	return n, err
}

// deadline is when the body's average rate since start would fall under
// the minimum if nothing more arrived, never within the grace period; or
// the read timeout's end when that comes first (ours is false then).
func (b *rateBody) deadline(start time.Time) (time.Time, bool) {
	earned := time.Duration(float64(b.read) / float64(b.rule.rate) * float64(time.Second))
	dl := start.Add(max(b.rule.grace, earned))
	if !b.limit.IsZero() && b.limit.Before(dl) {
		return b.limit, false
	}
	return dl, true
}
