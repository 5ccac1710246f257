package server

import (
	"math"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"
)

// maxBuckets bounds the rate limiter's memory. Buckets idle long enough to
// be full again are dropped losslessly (a new bucket starts full); past
// this many, arbitrary ones go too, which only ever lets an agent send
// more, never less.
const maxBuckets = 10000

// limiter is a token bucket per authenticated agent: each agent may send
// burst requests at once and rate per second after that, whatever the
// others do.
type limiter struct {
	rate  rate.Limit
	burst int
	// idle is how long a bucket takes to fill up from empty: one unused
	// that long is the same as a new one.
	idle time.Duration

	mu        sync.Mutex
	buckets   map[string]*bucket // by agent id
	lastSweep time.Time
}

type bucket struct {
	lim  *rate.Limiter
	seen time.Time
}

// newLimiter returns a limiter of perSecond requests per second and a
// burst of burst (0: one second's worth, at least 1), or nil when
// perSecond is 0: no limit.
func newLimiter(perSecond float64, burst int) *limiter {
	if perSecond <= 0 {
		return nil
	}
	if burst <= 0 {
		burst = max(1, int(math.Ceil(perSecond)))
	}
	idle := time.Duration(float64(burst) / perSecond * float64(time.Second))
	return &limiter{rate: rate.Limit(perSecond), burst: burst, idle: max(idle, time.Second), buckets: map[string]*bucket{}}
}

// take spends one token of id's bucket at now. When there is none it
// spends nothing and says how long until there is.
func (l *limiter) take(id string, now time.Time) (ok bool, wait time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[id]
	if b == nil {
		l.sweep(now)
		b = &bucket{lim: rate.NewLimiter(l.rate, l.burst)}
		l.buckets[id] = b
	}
	b.seen = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return false, d
	}
	return true, 0
}

// sweep drops the buckets that are full again, at most once per idle
// period unless the map is at its bound; then, if still at its bound,
// arbitrary ones until half remain.
func (l *limiter) sweep(now time.Time) {
	if now.Sub(l.lastSweep) < l.idle && len(l.buckets) < maxBuckets {
		return
	}
	l.lastSweep = now
	for id, b := range l.buckets {
		if now.Sub(b.seen) >= l.idle {
			delete(l.buckets, id)
		}
	}
	if len(l.buckets) < maxBuckets {
		return
	}
	for id := range l.buckets {
		delete(l.buckets, id)
		if len(l.buckets) <= maxBuckets/2 {
			break
		}
	}
}

// rateLimit answers 429 rate_limited, with Retry-After in whole seconds
// (at least 1), to an agent past its rate. It runs after authentication,
// so a bucket belongs to a proven agent (an unknown key is refused before
// it could fill the map), and before anything that touches the database.
func (s *Server) rateLimit(next echo.HandlerFunc) echo.HandlerFunc {
	if s.limiter == nil {
		return next
	}
	return func(c echo.Context) error {
		a := agentFrom(c.Request().Context())
		if a == nil {
			return next(c)
		}
		if ok, wait := s.limiter.take(a.ID, time.Now()); !ok {
			secs := max(1, int(math.Ceil(wait.Seconds())))
			s.obs.Metrics.RateLimited()
			return &Problem{Status: 429, Code: "rate_limited", RetryAfter: secs,
				Detail: sprintf("agent %s is over its rate of %g requests per second (burst %d); retry in %d s", a.ID, float64(s.limiter.rate), s.limiter.burst, secs)}
		}
		return next(c)
	}
}
